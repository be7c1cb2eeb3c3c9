// Package controller holds the Memcached reconciler: the Kubebuilder tutorial's reconcile plus
// the status the wasmop memcached plugin writes, so both make the same writes.
package controller

import (
	"context"
	"fmt"
	"math"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "wasmop.dev/peers/controller-runtime/api/v1alpha1"
)

// Image is the memcached image of every Pod, as in the plugin.
const Image = "memcached:1.6.17-alpine"

// MemcachedReconciler reconciles a Memcached object.
type MemcachedReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

func labels(name string) map[string]string {
	return map[string]string{"app": "memcached", "memcached_cr": name}
}

// Reconcile runs one Deployment of spec.size Pods per Memcached and reports the Pods' names and
// an Available condition.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	memcached := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	size, invalid := desiredSize(memcached)
	if invalid != "" {
		changed := meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{
			Type: "Available", Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: invalid,
			ObservedGeneration: memcached.Generation,
		})
		if changed {
			if err := r.Status().Update(ctx, memcached); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("%s", invalid))
	}

	found := &appsv1.Deployment{}
	var available metav1.Condition
	err := r.Get(ctx, types.NamespacedName{Name: memcached.Name, Namespace: memcached.Namespace}, found)
	switch {
	case apierrors.IsNotFound(err):
		dep, err := r.deploymentForMemcached(memcached, size)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, err
		}
		available = metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "DeploymentMissing",
			Message: fmt.Sprintf("0/%d replicas available: the Deployment does not exist yet", size)}
	case err != nil:
		return ctrl.Result{}, err
	default:
		if found.Spec.Replicas == nil || *found.Spec.Replicas != size {
			found.Spec.Replicas = &size
			if err := r.Update(ctx, found); err != nil {
				return ctrl.Result{}, err
			}
		}
		ready := found.Status.AvailableReplicas
		message := fmt.Sprintf("%d/%d replicas available", ready, size)
		if ready >= size {
			available = metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: message}
		} else {
			available = metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "Progressing", Message: message}
		}
	}

	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(memcached.Namespace), client.MatchingLabels(labels(memcached.Name))); err != nil {
		return ctrl.Result{}, err
	}
	nodes := make([]string, 0, len(pods.Items))
	for _, pod := range pods.Items {
		nodes = append(nodes, pod.Name)
	}
	sort.Strings(nodes)

	available.ObservedGeneration = memcached.Generation
	changed := meta.SetStatusCondition(&memcached.Status.Conditions, available)
	if !equal(nodes, memcached.Status.Nodes) {
		memcached.Status.Nodes = nodes
		changed = true
	}
	if changed {
		if err := r.Status().Update(ctx, memcached); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// desiredSize is spec.size, or the message of why it is invalid (the plugin's messages).
func desiredSize(m *cachev1alpha1.Memcached) (int32, string) {
	if m.Spec.Size == nil {
		return 0, "spec.size is required"
	}
	size := *m.Spec.Size
	if size < 0 {
		return 0, fmt.Sprintf("spec.size must be 0 or more, got %d", size)
	}
	if size > math.MaxInt32 {
		return 0, fmt.Sprintf("spec.size must be at most %d, got %d", math.MaxInt32, size)
	}
	return int32(size), ""
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// deploymentForMemcached is the Deployment the plugin applies, owned by the Memcached.
func (r *MemcachedReconciler) deploymentForMemcached(m *cachev1alpha1.Memcached, size int32) (*appsv1.Deployment, error) {
	ls := labels(m.Name)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: ls},
		Spec: appsv1.DeploymentSpec{
			Replicas: &size,
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:    "memcached",
					Image:   Image,
					Command: []string{"memcached", "-m=64", "-o", "modern", "-v"},
					Ports:   []corev1.ContainerPort{{Name: "memcached", ContainerPort: 11211}},
				}}},
			},
		},
	}
	if err := ctrl.SetControllerReference(m, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

// SetupWithManager registers the controller: Memcacheds, the Deployments they own, and their
// Pods mapped back by the memcached_cr label.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	podToMemcached := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()["memcached_cr"]
		if !ok || o.GetLabels()["app"] != "memcached" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}).
		Owns(&appsv1.Deployment{}).
		Watches(&corev1.Pod{}, podToMemcached).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("memcached").
		Complete(r)
}
