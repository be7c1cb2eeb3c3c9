// The webapp wasmop plugin: reconciles WebApp (demo.example.com/v1).
//
// A WebAssembly component of world `operator` of `wasmop:plugin@0.3.0` (the WIT in `wit/`):
// it exports `plugin` (the manifest) and `reconciler`. Build it with `npm run build`, which runs
//     componentize-js --wit wit --world-name operator -o webapp.wasm webapp.js
// and test it with `npm test` (`node --test`): the file imports nothing from the component's
// bindings, so Node runs it as it is. `wasmop_sdk.js` holds the SDK's checks in plain JavaScript
// (quantities, conditions, failures with status, responses, a lookup fixture), with the Rust
// SDK's semantics and messages. console.log and console.error reach the host's log (info and
// warn). Every call starts from a fresh instance: nothing kept in a variable survives to the
// next reconcile.

import { Request, Response, Retryable, Terminal, falseCondition, trueCondition } from './wasmop_sdk.js';

// A `Terminal` failure is permanent for this version of the parent (an invalid spec): the host
// records it and waits for the object to change; a `Retryable` one is retried with backoff.
// Either can carry the status and conditions the parent shows beside it.
export { Retryable, Terminal };

const NAME = 'webapp';
const VERSION = '0.1.0';

// The kind this plugin reconciles (namespaced), and the kinds it creates for each parent: one
// object of each, named like the parent.
const PARENT = { group: 'demo.example.com', version: 'v1', kind: 'WebApp' };
const CHILDREN = [
  { group: '', version: 'v1', kind: 'ServiceAccount' },
  { group: '', version: 'v1', kind: 'ConfigMap' },
  { group: 'apps', version: 'v1', kind: 'Deployment' },
  { group: '', version: 'v1', kind: 'Service' },
  { group: 'policy', version: 'v1', kind: 'PodDisruptionBudget' },
];

// The admission webhooks, each on the parent's CREATE and UPDATE.
const WEBHOOKS = [
  { name: 'validate', type: 'validating' },
];

const [SERVICE_ACCOUNT, CONFIG_MAP, DEPLOYMENT, SERVICE, PDB] = CHILDREN;

/** What makes a spec invalid (the first problem), or undefined; checked in the spec's order. */
function problem(spec) {
  const { image, replicas = 1, port = 8080 } = spec;
  if (typeof image !== 'string' || image === '') return 'spec.image must be set';
  if (!Number.isInteger(replicas) || replicas < 0 || replicas > 50) {
    return `spec.replicas must be between 0 and 50, got ${JSON.stringify(replicas)}`;
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) return `spec.port must be between 1 and 65535, got ${JSON.stringify(port)}`;
  return undefined;
}

/** The five children, in the order they are applied. */
function children(req, spec) {
  const name = req.name;
  const labels = { 'app.kubernetes.io/name': 'webapp', 'app.kubernetes.io/instance': name };
  const metadata = { labels };
  const container = {
    name: 'app',
    image: spec.image,
    ports: [{ name: 'http', containerPort: spec.port ?? 8080 }],
    envFrom: [{ configMapRef: { name: `${name}-config` } }],
  };
  const template = { metadata, spec: { serviceAccountName: name, containers: [container] } };
  return [
    req.newChild(SERVICE_ACCOUNT, name, { metadata, automountServiceAccountToken: false }),
    req.newChild(CONFIG_MAP, `${name}-config`, { metadata, data: spec.config ?? {} }),
    req.newChild(DEPLOYMENT, name, { metadata, spec: { replicas: spec.replicas ?? 1, selector: { matchLabels: labels }, template } }),
    req.newChild(SERVICE, name, { metadata, spec: { selector: labels, ports: [{ name: 'http', port: 80, targetPort: 'http' }] } }),
    req.newChild(PDB, name, { metadata, spec: { maxUnavailable: 1, selector: { matchLabels: labels } } }),
  ];
}

export const plugin = {
  manifest() {
    return {
      name: NAME,
      version: VERSION,
      description: `Reconciles ${PARENT.kind}`,
      parent: { kind: PARENT, scope: 'namespaced' },
      children: CHILDREN,
      related: [],
      finalizer: false,
      prune: true,
      adoptUnowned: false,
      configSchema: undefined,
      webhooks: WEBHOOKS.map(webhook),
    };
  },
};

export const reconciler = {
  /** The five children of a WebApp and its status from the observed Deployment. Throws
   * `Terminal` (with `phase: Invalid` and `Ready=False InvalidSpec`) for an invalid spec. */
  reconcile(request) {
    const req = Request.fromContract(request);
    const spec = req.parent.spec ?? {};
    const invalid = problem(spec);
    if (invalid !== undefined) {
      throw new Terminal(invalid).withStatus({ phase: 'Invalid' }).withCondition(falseCondition('Ready', 'InvalidSpec', invalid));
    }
    const replicas = spec.replicas ?? 1;
    const ready = req.child(DEPLOYMENT, req.name)?.status?.readyReplicas ?? 0;
    const message = `${ready}/${replicas} replicas ready`;
    const done = ready >= replicas;
    const response = new Response()
      .status({ readyReplicas: ready, phase: done ? 'Ready' : 'Progressing' })
      .condition(done ? trueCondition('Ready', 'AllReplicasReady', message) : falseCondition('Ready', 'ReplicasNotReady', message));
    for (const child of children(req, spec)) response.apply(child);
    return response.toContract();
  },
};

/** The `validate` webhook (validating, on WebApp CREATE and UPDATE): refuses what `reconcile`
 * refuses, and an image that names neither a tag nor a digest. */
export function admitValidate(object) {
  const spec = object.spec ?? {};
  let message = problem(spec);
  const image = spec.image ?? '';
  if (message === undefined && !image.includes('@') && !image.split('/').pop().includes(':')) {
    message = `spec.image must name a tag or a digest, got ${JSON.stringify(image)}`;
  }
  return message === undefined ? { allowed: true } : { allowed: false, code: 422, message };
}

/** Each webhook's function, by name. */
const ADMIT = {
  'validate': admitValidate,
};

/** A webhook of `WEBHOOKS` as the contract declares it: on the parent's CREATE and UPDATE,
 * failing closed. */
function webhook({ name, type }) {
  return {
    name,
    type,
    rules: [
      { operations: ['create', 'update'], apiGroups: [PARENT.group], apiVersions: [PARENT.version], resources: ['webapps'], scope: 'all' },
    ],
    namespaceSelector: '',
    objectSelector: '',
    failurePolicy: 'fail',
    sideEffects: 'none',
    timeoutSeconds: 5,
    // CEL expressions the API server checks before it calls the webhook, e.g.
    // { name: 'has-spec', expression: 'has(object.spec)' }: empty, every request of the rules.
    matchConditions: [],
  };
}

/** An admission error the host reports (it denies the request with the message). */
export class AdmissionError extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

export const admission = {
  /** Answer one admission request for `webhook`: `request.object` is JSON text. */
  admit(webhook, request) {
    const answer = ADMIT[webhook];
    if (answer === undefined) throw new AdmissionError('unknown-webhook', webhook);
    if (request.object === undefined) throw new AdmissionError('failed', `webhook ${webhook}: the request has no object`);
    const verdict = answer(JSON.parse(request.object));
    if (verdict.allowed) {
      const mutated = verdict.mutated === undefined ? undefined : JSON.stringify(verdict.mutated);
      return { tag: 'allowed', val: { warnings: [], mutated } };
    }
    return { tag: 'denied', val: { code: verdict.code, message: verdict.message, warnings: [] } };
  },
};
