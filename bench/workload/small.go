package workload

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Small ConfigMaps are the many tiny objects of the scale scenario: one
// short data key each, no labels, spread round-robin over namespaces of
// their own, so that they can be counted apart from the workload's.

// SmallNamespaceName is the i-th namespace of the small ConfigMaps.
func SmallNamespaceName(i int) string { return fmt.Sprintf("small-%03d", i) }

// SmallConfigMapName is the name of the j-th small ConfigMap. Names sort
// as their numbers (seven digits) and before every other ConfigMap's
// the benchmark or kube-apiserver creates.
func SmallConfigMapName(j int) string { return fmt.Sprintf("cm-%07d", j) }

// NewSmallConfigMap is the j-th small ConfigMap with k namespaces.
func NewSmallConfigMap(j, k int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: SmallConfigMapName(j), Namespace: SmallNamespaceName(j % k)},
		Data:       map[string]string{"key": "value-" + strconv.Itoa(j)},
	}
}

// CreateSmallConfigMaps creates small ConfigMaps from..to-1 over k
// namespaces, workers at a time, creating the namespaces first. What
// exists already (a namespace, a ConfigMap) counts as created, so a
// creation cut short can be run again.
func CreateSmallConfigMaps(ctx context.Context, c kubernetes.Interface, k, from, to, workers int) error {
	for i := range k {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SmallNamespaceName(i)}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	return createEach(ctx, from, to, workers, func(ctx context.Context, j int) error {
		cm := NewSmallConfigMap(j, k)
		if _, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create configmap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	})
}

// CountSmallConfigMaps counts the ConfigMaps in the k namespaces of the
// small ones.
func CountSmallConfigMaps(ctx context.Context, c kubernetes.Interface, k int) (int, error) {
	total := 0
	for i := range k {
		n, err := CountConfigMaps(ctx, c, SmallNamespaceName(i))
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// CountConfigMaps counts the ConfigMaps of a namespace ("": of every
// namespace) from a list of one and the number of items it says remain,
// so that a million are counted without listing them.
func CountConfigMaps(ctx context.Context, c kubernetes.Interface, namespace string) (int, error) {
	l, err := c.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("count configmaps: %w", err)
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	} else if l.Continue != "" {
		return 0, fmt.Errorf("count configmaps: a page of one with more to come, but no remainingItemCount")
	}
	return n, nil
}
