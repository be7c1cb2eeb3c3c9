// The {{name}} wasmop plugin: reconciles {{Kind}} ({{api_version}}).
//
// A WebAssembly component of world `{{world}}` of `wasmop:plugin@0.3.0` (the WIT in `wit/`):
// it exports `plugin` (the manifest) and `reconciler`. Build it with `npm run build`, which runs
//     componentize-js --wit wit --world-name {{world}} -o {{name}}.wasm {{name}}.js
// and test it with `npm test` (`node --test`): the file imports nothing from the component's
// bindings, so Node runs it as it is. `wasmop_sdk.js` holds the SDK's checks in plain JavaScript
// (quantities, conditions, failures with status, responses, a lookup fixture), with the Rust
// SDK's semantics and messages. console.log and console.error reach the host's log (info and
// warn). Every call starts from a fresh instance: nothing kept in a variable survives to the
// next reconcile.

import { Retryable, Terminal, falseCondition, trueCondition } from './wasmop_sdk.js';

// A `Terminal` failure is permanent for this version of the parent (an invalid spec): the host
// records it and waits for the object to change; a `Retryable` one is retried with backoff.
// Either can carry the status and conditions the parent shows beside it.
export { Retryable, Terminal };

const NAME = '{{name}}';
const VERSION = '0.1.0';

// The kind this plugin reconciles (namespaced), and the kinds it creates for each parent: one
// object of each, named like the parent.
const PARENT = {{parent}};
const CHILDREN = [
{{children}}];
{{webhook_list}}
/** A terminal failure for an invalid spec, shown on the parent as `Ready=False InvalidSpec`
 * with the same message (the next valid reconcile replaces it). Add status fields with
 * `.withStatus({ ... })`. */
const invalidSpec = (message) => new Terminal(message).withCondition(falseCondition('Ready', 'InvalidSpec', message));

/** `group/version`, or `version` for the core group. */
const apiVersion = (kind) => (kind.group ? `${kind.group}/${kind.version}` : kind.version);

/** `group/version/Kind`, as the host writes a kind. */
const kindText = (kind) => `${apiVersion(kind)}/${kind.kind}`;

/** The fields of `spec` the plugin reads, checked. Add the ones your CRD defines. */
function specOf(parent) {
  const spec = parent.spec ?? {};
  if (typeof spec !== 'object' || Array.isArray(spec)) throw invalidSpec(`spec must be an object, got ${JSON.stringify(spec)}`);
  const message = spec.message ?? '';
  if (typeof message !== 'string') throw invalidSpec(`spec.message must be a string, got ${JSON.stringify(message)}`);
  return { message };
}

/** The object of `kind` the plugin wants for `parent`: named like the parent, in its namespace.
 * Fill in each kind's fields here (a Deployment needs its spec). */
function desired(kind, parent, spec) {
  const metadata = { name: parent.metadata.name };
  if (parent.metadata.namespace !== undefined) metadata.namespace = parent.metadata.namespace;
  const child = { apiVersion: apiVersion(kind), kind: kind.kind, metadata };
  if (kind.group === '' && kind.kind === 'ConfigMap') child.data = { message: spec.message };
  return child;
}

/** Whether `object` is the object of `kind` named `name`. */
const isChild = (object, kind, name) =>
  object.apiVersion === apiVersion(kind) && object.kind === kind.kind && object.metadata?.name === name;

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
      webhooks: {{manifest_webhooks}},
    };
  },
};

export const reconciler = {
  /** Decide the desired state of one parent. `request.parent` and each of `request.children`
   * are JSON text; `request.config` is the operator's configuration (`{}` when none). Throws
   * `Terminal` for an invalid spec, `Retryable` for a transient failure. */
  reconcile(request) {
    const parent = JSON.parse(request.parent);
    const children = request.children.map((c) => JSON.parse(c));
    const spec = specOf(parent);
    const name = parent.metadata.name;
    const waiting = CHILDREN.filter((kind) => !children.some((c) => isChild(c, kind, name))).map(kindText);
    const ready = waiting.length
      ? falseCondition('Ready', 'Creating', `waiting for ${waiting.join(', ')}`)
      : trueCondition('Ready', 'ChildrenReady', 'every child exists');
    return {
      children: CHILDREN.map((kind) => JSON.stringify(desired(kind, parent, spec))),
      delete: [],
      status: JSON.stringify({ children: CHILDREN.length - waiting.length }),
      conditions: [ready],
      events: [],
      requeueAfterMs: undefined,
      finalized: false,
    };
  },
};
{{admission_export}}