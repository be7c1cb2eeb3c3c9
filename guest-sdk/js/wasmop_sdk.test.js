// The JavaScript SDK module against the shared test vectors (`../vectors/sdk.json`), which the
// Rust SDK's and the Python module's tests read too: `node --test` in this directory.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as sdk from './wasmop_sdk.js';

const VECTORS = JSON.parse(readFileSync(new URL('../vectors/sdk.json', import.meta.url), 'utf8'));

test('quantities parse to exact nanos and round up to units and millis', () => {
  for (const c of VECTORS.quantity.parse) {
    const q = sdk.Quantity.parse(c.text);
    assert.equal(q.nanos, BigInt(c.nanos), c.text);
    assert.equal(q.toUnitsCeil(), c.units, c.text);
    assert.equal(q.toMillisCeil(), c.millis, c.text);
    assert.equal(String(q), c.text, 'a quantity shows as written');
  }
});

test('malformed and huge quantities are refused naming the text', () => {
  for (const c of VECTORS.quantity.errors) {
    assert.throws(() => sdk.Quantity.parse(c.text), (error) => error instanceof sdk.QuantityError && error.message === c.error, c.text);
  }
});

test('quantities compare by value whatever the suffix', () => {
  for (const c of VECTORS.quantity.compare) {
    const [a, b] = [sdk.Quantity.parse(c.a), sdk.Quantity.parse(c.b)];
    assert.equal(a.compare(b), c.order, `${c.a} ${c.b}`);
    assert.equal(a.equals(b), c.order === 0);
  }
});

test('json holds strings or numbers', () => {
  for (const c of VECTORS.quantity.json) {
    if (c.error !== undefined) {
      assert.throws(() => sdk.Quantity.fromJson(c.value), (error) => error instanceof sdk.QuantityError && error.message === c.error);
    } else {
      assert.equal(String(sdk.Quantity.fromJson(c.value)), c.text);
    }
  }
});

test('selectors match labels as the host does', () => {
  for (const c of VECTORS.selector.matches) {
    assert.equal(sdk.LabelSelector.parse(c.selector).matches(VECTORS.selector.labels), c.matches, c.selector);
  }
});

test('bad selectors are refused naming the requirement', () => {
  for (const c of VECTORS.selector.errors) {
    assert.throws(() => sdk.LabelSelector.parse(c.selector), (error) => error instanceof sdk.SelectorError && error.message === c.error, c.selector);
  }
});

test('a later condition of a type replaces the earlier one', () => {
  for (const c of VECTORS.conditions.set) {
    let conditions = [];
    const response = new sdk.Response();
    for (const next of c.set) {
      conditions = sdk.setCondition(conditions, next);
      response.condition(next);
    }
    assert.deepEqual(conditions, c.conditions, c.about);
    assert.deepEqual(response.conditions, c.conditions, c.about);
  }
});

test('merged conditions carry observedGeneration and stable transition times', () => {
  for (const c of VECTORS.conditions.merge) {
    assert.deepEqual(sdk.mergeConditions(c.existing, c.updates, c.generation, c.now), c.conditions, c.about);
    const parent = { metadata: { name: 'p' }, status: { conditions: c.existing } };
    if (c.generation !== null) parent.metadata.generation = c.generation;
    assert.deepEqual(sdk.shownConditions(parent, c.updates, c.now), c.conditions, c.about);
  }
  // The contract's lowercase status is written as Kubernetes writes it.
  const [ready] = sdk.mergeConditions([], [sdk.falseCondition('Ready', 'R')], 1, 't');
  assert.equal(ready.status, 'False');
});

test('condition constructors write the contract status', () => {
  assert.deepEqual(sdk.condition('Ready', true, 'R', 'm'), { type: 'Ready', status: 'true', reason: 'R', message: 'm' });
  assert.equal(sdk.condition('Ready', 'Unknown', 'R').status, 'unknown');
  assert.throws(() => sdk.condition('Ready', 'yes', 'R'), /status must be true, false or unknown/);
});

test('children of the wrong shape are dropped and the first named', () => {
  for (const c of VECTORS.response.children) {
    const response = new sdk.Response();
    for (const child of c.apply) response.apply(child);
    assert.deepEqual(response.children.map((child) => child.metadata.name), c.applied);
    assert.equal(response.error, c.error);
    if (c.error === null) {
      assert.equal(response.validate(), response);
    } else {
      assert.throws(() => response.validate(), (error) => error instanceof sdk.Terminal && error.message === c.error);
    }
  }
});

test('status must be an object and merges', () => {
  for (const c of VECTORS.response.status) {
    const response = new sdk.Response();
    for (const fields of c.status) response.status(fields);
    assert.deepEqual(response.statusPatch, c.patch);
    assert.equal(response.error, c.error);
  }
});

test('a response is the contract record', () => {
  const response = new sdk.Response()
    .apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } })
    .status({ ready: 1 })
    .condition(sdk.trueCondition('Ready', 'Applied'))
    .requeueAfter(5000);
  assert.deepEqual(response.toContract(), {
    children: ['{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}'],
    delete: [],
    status: '{"ready":1}',
    conditions: [{ type: 'Ready', status: 'true', reason: 'Applied', message: '' }],
    events: [],
    requeueAfterMs: 5000n,
    finalized: false,
  });
  assert.throws(() => new sdk.Response().status([]).toContract(), sdk.Terminal);
});

test('a failure carries what the parent shows', () => {
  for (const c of VECTORS.failure) {
    const failure = c.retryable ? new sdk.Retryable(c.message) : new sdk.Terminal(c.message);
    for (const fields of c.status) failure.withStatus(fields);
    for (const next of c.conditions) failure.withCondition(next);
    assert.equal(failure.retryable, c.retryable, c.about);
    assert.deepEqual(failure.shown(), c.shown, c.about);
    // componentize-js hands the host an own `payload` property of what `reconcile` throws.
    assert.ok(Object.hasOwn(failure, 'payload'), 'payload is an own property');
    assert.deepEqual(failure.payload, {
      tag: c.retryable ? 'retryable' : 'terminal',
      val: {
        message: c.shown.message,
        status: c.shown.status === null ? undefined : JSON.stringify(c.shown.status),
        conditions: c.shown.conditions,
      },
    });
  }
});

test('lookups answer as the host and refuse undeclared kinds', () => {
  const { manifest, objects, lookups } = VECTORS.fixture;
  const context = new sdk.Fixture(objects, { manifest });
  for (const c of lookups) {
    const lookup = () =>
      c.op === 'get' ? context.get(c.kind, c.namespace, c.name) : context.list(c.kind, c.namespace, c.selector);
    if (c.error !== undefined) {
      assert.throws(lookup, (error) => error instanceof sdk.LookupRefused && error.message === c.error, c.about);
      continue;
    }
    const found = lookup();
    const list = found === undefined ? [] : Array.isArray(found) ? found : [found];
    assert.deepEqual(list.map((o) => `${o.metadata.namespace}/${o.metadata.name}`), c.found, c.about);
  }
});

test('a cluster-scoped parent reads every namespace', () => {
  const manifest = { ...VECTORS.fixture.manifest, scope: 'cluster' };
  const pods = new sdk.Fixture(VECTORS.fixture.objects, { manifest }).list(sdk.kind('', 'v1', 'Pod'), undefined, 'app=web');
  assert.deepEqual(pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), ['default/web-1', 'default/web-2', 'other/web-1']);
});

test("a new child is named in the parent's namespace with the body's fields", () => {
  for (const c of VECTORS.newChild) {
    const body = structuredClone(c.body);
    assert.deepEqual(new sdk.Request(c.parent).newChild(c.kind, c.name, body), c.child, c.about);
    assert.deepEqual(body, c.body, `${c.about}: the body is not changed`);
  }
  assert.throws(() => new sdk.Request({ metadata: { name: 'p' } }).newChild(sdk.kind('', 'v1', 'Pod'), 'p', []), {
    name: 'TypeError',
    message: 'the body of a new child must be a JSON object, got an array',
  });
});

test('children and related objects are found by kind and name', () => {
  const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' } };
  const config = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web' } };
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web-1' } };
  const parent = { metadata: { name: 'web', namespace: 'prod', generation: 3 } };
  const req = sdk.Request.fromContract({
    parent: JSON.stringify(parent),
    children: [config, deployment].map((o) => JSON.stringify(o)),
    related: [JSON.stringify(pod)],
    finalizing: false,
    config: '{}',
  });
  assert.deepEqual([req.name, req.namespace, req.generation, req.config], ['web', 'prod', 3, {}]);
  assert.deepEqual(req.child(sdk.kind('apps', 'v1', 'Deployment'), 'web'), deployment);
  assert.equal(req.child(sdk.kind('apps', 'v1', 'Deployment'), 'other'), undefined);
  assert.deepEqual(req.childrenOf(sdk.kind('', 'v1', 'ConfigMap')), [config]);
  assert.deepEqual(req.relatedOf(sdk.kind('', 'v1', 'Pod')), [pod]);
});
