package demo

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// WidgetGVR is the demo's custom resource, widgets.demo.kubegate.io.
var WidgetGVR = schema.GroupVersionResource{Group: "demo.kubegate.io", Version: "v1", Resource: "widgets"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var (
	widgetNames  = []string{"sprocket", "gizmo", "doohickey", "whatsit"}
	widgetColors = []string{"red", "green", "blue", "orange", "purple"}
)

// widgetCRD is built as unstructured data so that the demo needs only the
// dynamic client, not the apiextensions clientset.
func widgetCRD() *unstructured.Unstructured {
	str := map[string]any{"type": "string"}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":   WidgetGVR.Resource + "." + WidgetGVR.Group,
			"labels": map[string]any{partOfLabel: partOfValue},
		},
		"spec": map[string]any{
			"group": WidgetGVR.Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural":     "widgets",
				"singular":   "widget",
				"kind":       "Widget",
				"listKind":   "WidgetList",
				"shortNames": []any{"wd"},
				"categories": []any{"all", "demo"},
			},
			"versions": []any{map[string]any{
				"name":         WidgetGVR.Version,
				"served":       true,
				"storage":      true,
				"subresources": map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
					map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
					map[string]any{"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
					map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
				},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{
							"type":     "object",
							"required": []any{"color", "size"},
							"properties": map[string]any{
								"color": map[string]any{"type": "string", "enum": toAny(widgetColors)},
								"size":  map[string]any{"type": "integer", "minimum": int64(1), "maximum": int64(10)},
								"owner": str,
							},
						},
						"status": map[string]any{
							"type": "object",
							"properties": map[string]any{
								"phase":              map[string]any{"type": "string", "enum": []any{"Pending", "Reconciling", "Ready"}},
								"observedGeneration": map[string]any{"type": "integer", "format": "int64"},
								"message":            str,
							},
						},
					},
				}},
			}},
		},
	}}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// ensureWidgetCRD creates the CRD if needed and waits until it is
// established, so that widgets can be created.
func ensureWidgetCRD(ctx context.Context, dyn dynamic.Interface) error {
	crd := widgetCRD()
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		last = "not established yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s (%s): %w", crd.GetName(), last, err)
	}
	return nil
}

func newWidget(ns, name string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": WidgetGVR.GroupVersion().String(),
		"kind":       "Widget",
		"metadata": map[string]any{
			"name":      name,
			"namespace": ns,
			"labels":    map[string]any{partOfLabel: partOfValue, "app": "widget-factory"},
		},
		"spec": map[string]any{
			"color": widgetColors[i%len(widgetColors)],
			"size":  int64(i%10 + 1),
			"owner": "team-" + []string{"alpha", "bravo", "charlie"}[i%3],
		},
	}}
}

// setWidgetStatus reports the widget as reconciled at its current
// generation.
func setWidgetStatus(w *unstructured.Unstructured, phase, message string) {
	unstructured.SetNestedMap(w.Object, map[string]any{
		"phase":              phase,
		"observedGeneration": w.GetGeneration(),
		"message":            message,
	}, "status")
}
