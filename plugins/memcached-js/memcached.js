// The Memcached operator as a wasmop plugin written in JavaScript.
//
// The same logic as the Rust example (`plugins/memcached`): for every `Memcached`
// (`cache.example.com/v1alpha1`, namespaced) one Deployment of `spec.size` memcached pods, the
// pods' names in `status.nodes`, and an `Available` condition; an invalid size is a terminal
// failure that also shows `Available=False InvalidSpec` on the Memcached. The test suite checks
// that both plugins plan the same actions, and show the same failures, on the same objects.
//
// World `controller` of `wasmop:plugin@0.3.0`. Build (the tool `scripts/polyglot.sh` installs):
//
//     componentize-js --wit wit/v0.3.0 --world-name controller -o memcached-js.wasm plugins/memcached-js/memcached.js

import { log } from 'wasmop:plugin/log@0.3.0';

const IMAGE = 'memcached:1.6.17-alpine';
const PORT = 11211;
const INT32_MAX = 2 ** 31 - 1;

const MEMCACHED = { group: 'cache.example.com', version: 'v1alpha1', kind: 'Memcached' };
const DEPLOYMENT = { group: 'apps', version: 'v1', kind: 'Deployment' };
const POD = { group: '', version: 'v1', kind: 'Pod' };

/** A terminal failure for an invalid spec: the host records it and waits for the object to
 * change; the Memcached shows `Available=False InvalidSpec` with the same message (the next
 * valid reconcile replaces it). */
class InvalidSpec extends Error {
  constructor(message) {
    super(message);
    const shown = { type: 'Available', status: 'false', reason: 'InvalidSpec', message };
    this.payload = { tag: 'terminal', val: { message, status: undefined, conditions: [shown] } };
  }
}

/** `spec.size`: required, within 0..=i32::MAX. */
function desiredSize(memcached) {
  const spec = memcached.spec ?? {};
  if (typeof spec !== 'object' || Array.isArray(spec)) throw new InvalidSpec('spec must be an object');
  const size = spec.size;
  if (size === undefined || size === null) throw new InvalidSpec('spec.size is required');
  if (!Number.isInteger(size)) throw new InvalidSpec(`spec.size must be an integer, got ${JSON.stringify(size)}`);
  if (size < 0) throw new InvalidSpec(`spec.size must be 0 or more, got ${size}`);
  if (size > INT32_MAX) throw new InvalidSpec(`spec.size must be at most ${INT32_MAX}, got ${size}`);
  return size;
}

const labels = (name) => ({ app: 'memcached', memcached_cr: name });

function deployment(name, namespace, size) {
  const metadata = { name, labels: labels(name) };
  if (namespace !== undefined) metadata.namespace = namespace;
  const container = {
    name: 'memcached',
    image: IMAGE,
    command: ['memcached', '-m=64', '-o', 'modern', '-v'],
    ports: [{ name: 'memcached', containerPort: PORT }],
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata,
    spec: {
      replicas: size,
      selector: { matchLabels: labels(name) },
      template: { metadata: { labels: labels(name) }, spec: { containers: [container] } },
    },
  };
}

/** The `Available` condition from the observed Deployment (if any). */
function available(observed, size) {
  if (observed === undefined) {
    const message = `0/${size} replicas available: the Deployment does not exist yet`;
    return { type: 'Available', status: 'false', reason: 'DeploymentMissing', message };
  }
  const ready = observed.status?.availableReplicas ?? 0;
  const message = `${ready}/${size} replicas available`;
  return ready >= size
    ? { type: 'Available', status: 'true', reason: 'MinimumReplicasAvailable', message }
    : { type: 'Available', status: 'false', reason: 'Progressing', message };
}

const isKind = (obj, kind) =>
  obj.apiVersion === (kind.group ? `${kind.group}/${kind.version}` : kind.version) && obj.kind === kind.kind;

export const plugin = {
  manifest() {
    return {
      name: 'memcached',
      version: '0.1.0',
      description: 'Runs a memcached Deployment of spec.size pods for each Memcached',
      parent: { kind: MEMCACHED, scope: 'namespaced' },
      children: [DEPLOYMENT],
      related: [{ kind: POD, labelSelector: 'app=memcached,memcached_cr=$(parent.name)' }],
      finalizer: false,
      prune: true,
      adoptUnowned: false,
      configSchema: undefined,
      webhooks: [],
    };
  },
};

export const reconciler = {
  reconcile(request) {
    const parent = JSON.parse(request.parent);
    const size = desiredSize(parent);
    const { name, namespace } = parent.metadata;
    log('debug', `memcached ${namespace ?? ''}/${name}: want ${size} replicas`);

    const nodes = request.related
      .map((o) => JSON.parse(o))
      .filter((p) => isKind(p, POD) && p.metadata?.name !== undefined)
      .map((p) => p.metadata.name)
      .sort();
    const observed = request.children
      .map((o) => JSON.parse(o))
      .find((c) => isKind(c, DEPLOYMENT) && c.metadata?.name === name);

    return {
      children: [JSON.stringify(deployment(name, namespace, size))],
      delete: [],
      status: JSON.stringify({ nodes }),
      conditions: [available(observed, size)],
      events: [],
      requeueAfterMs: undefined,
      finalized: false,
    };
  },
};
