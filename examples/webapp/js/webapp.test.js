// Unit tests of the plugin, in Node without the WebAssembly toolchain: `npm test`.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Terminal, admission, plugin, reconciler } from './webapp.js';
import { shownConditions } from './wasmop_sdk.js';

const SHOP = { image: 'nginx:1.27', replicas: 2, port: 8080, config: { MODE: 'live' } };
const LABELS = { 'app.kubernetes.io/name': 'webapp', 'app.kubernetes.io/instance': 'sample' };

const sample = (spec) => ({
  apiVersion: 'demo.example.com/v1',
  kind: 'WebApp',
  metadata: { name: 'sample', namespace: 'default', generation: 1 },
  spec,
});

const request = (spec, children = []) => ({
  parent: JSON.stringify(sample(spec)),
  children: children.map((c) => JSON.stringify(c)),
  related: [],
  finalizing: false,
  config: '{}',
});

const deployment = (status) => ({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'sample', namespace: 'default' }, status });

test('applies five labelled children in order', () => {
  const children = reconciler.reconcile(request(SHOP)).children.map((c) => JSON.parse(c));
  assert.deepEqual(
    children.map((c) => [c.kind, c.metadata.name, c.metadata.namespace]),
    [['ServiceAccount', 'sample'], ['ConfigMap', 'sample-config'], ['Deployment', 'sample'], ['Service', 'sample'], ['PodDisruptionBudget', 'sample']].map(
      (k) => [...k, 'default'],
    ),
  );
  for (const child of children) assert.deepEqual(child.metadata.labels, LABELS);
  const [account, config, app, service, budget] = children;
  assert.equal(account.automountServiceAccountToken, false);
  assert.deepEqual(config.data, { MODE: 'live' });
  assert.deepEqual([app.spec.replicas, app.spec.template.metadata.labels, app.spec.template.spec.serviceAccountName], [2, LABELS, 'sample']);
  const [container] = app.spec.template.spec.containers;
  assert.deepEqual(container.ports, [{ name: 'http', containerPort: 8080 }]);
  assert.deepEqual(container.envFrom, [{ configMapRef: { name: 'sample-config' } }]);
  assert.deepEqual(service.spec.ports, [{ name: 'http', port: 80, targetPort: 'http' }]);
  assert.deepEqual(budget.spec, { maxUnavailable: 1, selector: { matchLabels: LABELS } });
});

test('defaults fill what the spec leaves out', () => {
  const [, config, app] = reconciler.reconcile(request({ image: 'nginx:1.27' })).children.map((c) => JSON.parse(c));
  assert.deepEqual([config.data, app.spec.replicas, app.spec.template.spec.containers[0].ports[0].containerPort], [{}, 1, 8080]);
});

test('ready follows the observed deployment', () => {
  for (const [observed, ready, phase, status, reason] of [
    [[], 0, 'Progressing', 'False', 'ReplicasNotReady'],
    [[deployment({})], 0, 'Progressing', 'False', 'ReplicasNotReady'],
    [[deployment({ readyReplicas: 1 })], 1, 'Progressing', 'False', 'ReplicasNotReady'],
    [[deployment({ readyReplicas: 2 })], 2, 'Ready', 'True', 'AllReplicasReady'],
  ]) {
    const response = reconciler.reconcile(request(SHOP, observed));
    assert.deepEqual(JSON.parse(response.status), { readyReplicas: ready, phase });
    const [shown] = shownConditions(sample(SHOP), response.conditions);
    assert.deepEqual(
      [shown.type, shown.status, shown.reason, shown.message, shown.observedGeneration],
      ['Ready', status, reason, `${ready}/2 replicas ready`, 1],
    );
  }
});

test('an invalid spec is a terminal error shown on the parent', () => {
  for (const [spec, message] of [
    [{}, 'spec.image must be set'],
    [{ image: 'nginx:1.27', replicas: 51 }, 'spec.replicas must be between 0 and 50, got 51'],
    [{ image: 'nginx:1.27', port: 0 }, 'spec.port must be between 1 and 65535, got 0'],
  ]) {
    assert.throws(() => reconciler.reconcile(request(spec)), (error) => {
      assert.ok(error instanceof Terminal);
      const ready = { type: 'Ready', status: 'false', reason: 'InvalidSpec', message };
      assert.deepEqual(error.payload, { tag: 'terminal', val: { message, status: '{"phase":"Invalid"}', conditions: [ready] } });
      return true;
    });
  }
});

const admissionRequest = (spec) => ({
  object: JSON.stringify({ apiVersion: 'demo.example.com/v1', kind: 'WebApp', metadata: { name: 'sample', namespace: 'default' }, spec }),
});

test('every webhook is declared on the parent', () => {
  for (const declared of plugin.manifest().webhooks) {
    assert.deepEqual(declared.rules[0].resources, ['webapps']);
  }
});

test('webhook validate refuses invalid specs and untagged images', () => {
  for (const image of ['nginx:1.27', 'registry:5000/nginx:1.27', 'nginx@sha256:abc']) {
    assert.deepEqual(admission.admit('validate', admissionRequest({ image })), { tag: 'allowed', val: { warnings: [], mutated: undefined } });
  }
  for (const [spec, message] of [
    [{ image: 'nginx' }, 'spec.image must name a tag or a digest, got "nginx"'],
    [{ image: 'registry:5000/nginx' }, 'spec.image must name a tag or a digest, got "registry:5000/nginx"'],
    [{ image: '' }, 'spec.image must be set'],
    [{ image: 'nginx', replicas: -1 }, 'spec.replicas must be between 0 and 50, got -1'],
  ]) {
    assert.deepEqual(admission.admit('validate', admissionRequest(spec)), { tag: 'denied', val: { code: 422, message, warnings: [] } });
  }
});
