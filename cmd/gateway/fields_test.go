package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// TestFieldSelectorsThroughTheGateway runs kubectl with field selectors
// kube-apiserver serves beyond metadata.* (resource slices' spec.nodeName,
// a CRD's selectableFields) against kube-apiserver and the gateway, and
// subscribes with them over WebSocket: every answer names the objects
// kube-apiserver's does.
func TestFieldSelectorsThroughTheGateway(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	suffix := ns[len(ns)-5:]
	for name, spec := range map[string]resourcev1.ResourceSliceSpec{
		"a": {Driver: "gpu.example.com", NodeName: ptr.To("n1"), Pool: resourcev1.ResourcePool{Name: "pool-a", ResourceSliceCount: 1}},
		"b": {Driver: "gpu.example.com", NodeName: ptr.To("n2"), Pool: resourcev1.ResourcePool{Name: "pool-b", ResourceSliceCount: 1}},
		"c": {Driver: "net.example.com", AllNodes: ptr.To(true), Pool: resourcev1.ResourcePool{Name: "pool-c", ResourceSliceCount: 1}},
	} {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix}, Spec: spec}
		if _, err := env.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		})
	}
	group := "gwfields.kubegate.io"
	crd := testenv.NewCRD(group, "meters", "Meter")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	v["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"color": map[string]any{"type": "string"}, "on": map[string]any{"type": "boolean"}}}}}}
	v["selectableFields"] = []any{map[string]any{"jsonPath": ".spec.color"}, map[string]any{"jsonPath": ".spec.on"}}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	env.EnsureCRD(t, crd)
	meters := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "meters"}
	for name, spec := range map[string]map[string]any{"m1": {"color": "red", "on": true}, "m2": {"color": "blue"}, "m3": {"color": "red", "on": false}} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Meter",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		if _, err := env.Dynamic.Resource(meters).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	g := startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", addr, "--log-format", "json")
	waitReady(t, ctx, g, "http://"+addr)

	kubectl := env.Kubectl(t)
	dir := t.TempDir()
	run := func(server []string, args ...string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append(append([]string{"--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "60s"}, server...), args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl %s %s: %v\n%s%s", strings.Join(server, " "), strings.Join(args, " "), err, out.String(), errb.String())
		}
		var names []string
		for line := range strings.Lines(out.String()) {
			if line = strings.TrimSpace(line); line != "" && (strings.HasSuffix(line, suffix) || !strings.HasPrefix(line, "resourceslice")) {
				names = append(names, line)
			}
		}
		slices.Sort(names)
		return names
	}
	apiserver := []string{"--kubeconfig", kubeconfig}
	// kubectl sends a token only over HTTPS.
	front := newSwitchProxy(t, "http://"+addr)
	gateway := []string{"--kubeconfig", gatewayKubeconfig(t, front.srv.URL, front.ca, env.Config.BearerToken)}

	type query struct {
		resource, namespace, selector string
	}
	queries := []query{
		{"resourceslices", "", "spec.nodeName=n1"},
		{"resourceslices", "", "spec.nodeName="},
		{"resourceslices", "", "spec.driver=gpu.example.com,spec.pool.name!=pool-a"},
		{"meters." + group, ns, "spec.color=red"},
		{"meters." + group, ns, "spec.on=false"},
		{"meters." + group, ns, "spec.on="},
	}
	for _, q := range queries {
		args := []string{"get", q.resource, "-o", "name", "--field-selector", q.selector}
		if q.namespace != "" {
			args = append(args, "-n", q.namespace)
		}
		want := run(apiserver, args...)
		if len(want) == 0 {
			t.Fatalf("kube-apiserver selects nothing for %v: the test proves nothing", q)
		}
		if diff := cmp.Diff(want, run(gateway, args...)); diff != "" {
			t.Errorf("kubectl %s (-kube-apiserver +gateway):\n%s", strings.Join(args, " "), diff)
		}
	}

	// The same selectors over WebSocket: the snapshot holds the objects.
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{
		Subprotocols: []string{auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(env.Config.BearerToken)), "kubegate.v1"},
	})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	for i, q := range queries {
		sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": q.selector + q.resource, "resource": q.resource,
			"namespace": q.namespace, "fieldSelector": q.selector})
		if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
			t.Fatal(err)
		}
		var got []string
		for done := false; !done; {
			_, data, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			frames := []json.RawMessage{data}
			var f struct {
				Type   string            `json:"type"`
				ID     string            `json:"id"`
				Events []json.RawMessage `json:"events"`
				Object struct {
					Kind     string                `json:"kind"`
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"object"`
			}
			if json.Unmarshal(data, &f) == nil && f.Type == "batch" {
				frames = f.Events
			}
			for _, raw := range frames {
				if err := json.Unmarshal(raw, &f); err != nil {
					t.Fatal(err)
				}
				switch {
				case f.Type == "error":
					t.Fatalf("subscription %v: %s", q, raw)
				case f.ID != q.selector+q.resource:
				case f.Type == "ADDED" && (q.namespace != "" || strings.HasSuffix(f.Object.Metadata.Name, suffix)):
					prefix := "resourceslice.resource.k8s.io/"
					if q.namespace != "" {
						prefix = "meter." + group + "/"
					}
					got = append(got, prefix+f.Object.Metadata.Name)
				case f.Type == "END_OF_SNAPSHOT":
					done = true
				}
			}
		}
		slices.Sort(got)
		want := run(apiserver, append([]string{"get", q.resource, "-o", "name", "--field-selector", q.selector},
			map[bool][]string{true: {"-n", q.namespace}, false: nil}[q.namespace != ""]...)...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("subscription %d %v (-kube-apiserver +gateway):\n%s", i, q, diff)
		}
	}
}
