// Unit tests of the plugin, in Node without the WebAssembly toolchain: `npm test`.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Terminal, {{admission_test_import}}plugin, reconciler } from './{{name}}.js';
import { shownConditions } from './wasmop_sdk.js';

const sample = (spec) =>
  JSON.stringify({
    apiVersion: '{{api_version}}',
    kind: '{{Kind}}',
    metadata: { name: 'sample', namespace: 'default', generation: 1 },
    spec,
  });

const request = (spec, children = []) => ({ parent: sample(spec), children, related: [], finalizing: false, config: '{}' });

const { children: childKinds } = plugin.manifest();

test('applies one child of each kind and waits for them', () => {
  const response = reconciler.reconcile(request({ message: 'hi' }));
  assert.equal(response.children.length, childKinds.length);
  response.children.map((c) => JSON.parse(c)).forEach((child, i) => {
    assert.equal(child.kind, childKinds[i].kind);
    assert.equal(child.metadata.name, 'sample');
  });
  assert.equal(response.conditions[0].type, 'Ready');
  assert.equal(response.conditions[0].status, childKinds.length ? 'false' : 'true');
});

test('ready once every child is observed', () => {
  const desired = reconciler.reconcile(request({})).children;
  const response = reconciler.reconcile(request({}, desired));
  assert.equal(response.conditions[0].status, 'true');
  // What the sample shows once the host writes it: observedGeneration is its generation.
  assert.equal(shownConditions(JSON.parse(sample({})), response.conditions)[0].observedGeneration, 1);
  assert.deepEqual(JSON.parse(response.status), { children: childKinds.length });
});

test('a spec of the wrong shape is a terminal error shown on the parent', () => {
  assert.throws(() => reconciler.reconcile(request({ message: 3 })), (error) => {
    assert.ok(error instanceof Terminal);
    const message = 'spec.message must be a string, got 3';
    const ready = { type: 'Ready', status: 'false', reason: 'InvalidSpec', message };
    assert.deepEqual(error.payload, { tag: 'terminal', val: { message, status: undefined, conditions: [ready] } });
    return true;
  });
});
{{webhook_tests}}