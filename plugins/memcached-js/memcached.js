// The Memcached operator as a wasmop plugin written in JavaScript, on the SDK module
// (`wasmop_sdk.js`, a link to `guest-sdk/js/wasmop_sdk.js`).
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

import { Request, Response, Terminal, falseCondition, kind, trueCondition } from './wasmop_sdk.js';

const IMAGE = 'memcached:1.6.17-alpine';
const PORT = 11211;
const INT32_MAX = 2 ** 31 - 1;

const MEMCACHED = kind('cache.example.com', 'v1alpha1', 'Memcached');
const DEPLOYMENT = kind('apps', 'v1', 'Deployment');
const POD = kind('', 'v1', 'Pod');

/** A terminal failure for an invalid spec, shown on the Memcached as `Available=False
 * InvalidSpec` with the same message (the next valid reconcile replaces it). */
const invalid = (message) => new Terminal(message).withCondition(falseCondition('Available', 'InvalidSpec', message));

/** `spec.size`: required, within 0..=i32::MAX. */
function desiredSize(memcached) {
  const spec = memcached.spec ?? {};
  if (typeof spec !== 'object' || Array.isArray(spec)) throw invalid('spec must be an object');
  const size = spec.size;
  if (size === undefined || size === null) throw invalid('spec.size is required');
  if (!Number.isInteger(size)) throw invalid(`spec.size must be an integer, got ${JSON.stringify(size)}`);
  if (size < 0) throw invalid(`spec.size must be 0 or more, got ${size}`);
  if (size > INT32_MAX) throw invalid(`spec.size must be at most ${INT32_MAX}, got ${size}`);
  return size;
}

/** The `Available` condition from the observed Deployment (if any). */
function available(observed, size) {
  if (observed === undefined) {
    const message = `0/${size} replicas available: the Deployment does not exist yet`;
    return falseCondition('Available', 'DeploymentMissing', message);
  }
  const ready = observed.status?.availableReplicas ?? 0;
  const message = `${ready}/${size} replicas available`;
  return ready >= size
    ? trueCondition('Available', 'MinimumReplicasAvailable', message)
    : falseCondition('Available', 'Progressing', message);
}

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
    const req = Request.fromContract(request);
    const size = desiredSize(req.parent);
    log('debug', `memcached ${req.namespace ?? ''}/${req.name}: want ${size} replicas`);
    const labels = { app: 'memcached', memcached_cr: req.name };
    const container = {
      name: 'memcached',
      image: IMAGE,
      command: ['memcached', '-m=64', '-o', 'modern', '-v'],
      ports: [{ name: 'memcached', containerPort: PORT }],
    };
    const spec = {
      replicas: size,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [container] } },
    };
    const nodes = req
      .relatedOf(POD)
      .map((pod) => pod.metadata?.name)
      .filter((name) => name !== undefined)
      .sort();
    return new Response()
      .apply(req.newChild(DEPLOYMENT, req.name, { metadata: { labels }, spec }))
      .status({ nodes })
      .condition(available(req.child(DEPLOYMENT, req.name), size))
      .toContract();
  },
};
