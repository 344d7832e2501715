package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/testenv"
)

// mirror is a client's copy of the ConfigMaps in one namespace, kept the
// way a reflector keeps it: list, then watch from the list's
// resourceVersion, and on 410 list again.
type mirror struct {
	ns      string
	objects map[string]string // name → resourceVersion
	lastRV  string
	relists int
}

func (m *mirror) list(ctx context.Context, cs kubernetes.Interface) error {
	l, err := cs.CoreV1().ConfigMaps(m.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	m.objects = map[string]string{}
	for _, o := range l.Items {
		m.objects[o.Name] = o.ResourceVersion
	}
	m.lastRV = l.ResourceVersion
	return nil
}

// follow watches from lastRV until the mirror equals want. A 410 ERROR
// event is returned as an error for which apierrors.IsResourceExpired
// (or IsGone) holds.
func (m *mirror) follow(ctx context.Context, cs kubernetes.Interface, want map[string]string) error {
	if maps.Equal(m.objects, want) {
		return nil
	}
	w, err := cs.CoreV1().ConfigMaps(m.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: m.lastRV, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not converged (diff -got +want):\n%s: %w", cmp.Diff(m.objects, want), ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch ended before converging")
			}
			switch ev.Type {
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			case watch.Bookmark:
				m.lastRV = ev.Object.(*corev1.ConfigMap).ResourceVersion
				continue
			}
			o := ev.Object.(*corev1.ConfigMap)
			if ev.Type == watch.Deleted {
				delete(m.objects, o.Name)
			} else {
				m.objects[o.Name] = o.ResourceVersion
			}
			m.lastRV = o.ResourceVersion
			if maps.Equal(m.objects, want) {
				return nil
			}
		}
	}
}

// sync follows, and lists again from the same replica on 410, as
// client-go's reflector does.
func (m *mirror) sync(ctx context.Context, cs kubernetes.Interface, want map[string]string) error {
	err := m.follow(ctx, cs, want)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		m.relists++
		if err := m.list(ctx, cs); err != nil {
			return err
		}
		err = m.follow(ctx, cs, want)
	}
	return err
}

// client is a reader that can move from one replica to another.
type client interface {
	// sync connects to g, resuming where it left off, and follows until
	// its copy equals want.
	sync(ctx context.Context, g *gateway, want map[string]string) error
	// restarts counts the times a replica told it to start over.
	restarts() int
	copy() map[string]string
}

// restClient is a mirror over the REST list and watch.
type restClient struct{ m mirror }

func (c *restClient) sync(ctx context.Context, g *gateway, want map[string]string) error {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: g.url, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		return err
	}
	if c.m.objects == nil {
		if err := c.m.list(ctx, cs); err != nil {
			return err
		}
	}
	return c.m.sync(ctx, cs, want)
}
func (c *restClient) restarts() int           { return c.m.relists }
func (c *restClient) copy() map[string]string { return c.m.objects }

// wsClient is a mirror over one /ws subscription, resumed on a new socket
// with the rv of the last frame processed.
type wsClient struct {
	ns      string
	objects map[string]string
	lastRV  string
	resets  int
}

type wsFrame struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	RV     string          `json:"rv"`
	Reason string          `json:"reason"`
	Status json.RawMessage `json:"status"`
	Object struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"object"`
	Events []wsFrame `json:"events"`
}

func (c *wsClient) sync(ctx context.Context, g *gateway, want map[string]string) error {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/ws", &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	sub := map[string]any{"type": "subscribe", "id": "cms", "resource": "configmaps", "namespace": c.ns}
	// Without a resume point the subscription starts with a snapshot.
	inSnapshot := c.lastRV == ""
	if inSnapshot {
		c.objects = map[string]string{}
	} else {
		sub["resourceVersion"] = c.lastRV
	}
	if err := wsjson.Write(ctx, conn, sub); err != nil {
		return err
	}
	var handle func(f wsFrame) error
	handle = func(f wsFrame) error {
		switch f.Type {
		case "batch":
			for _, e := range f.Events {
				if err := handle(e); err != nil {
					return err
				}
			}
		case "error":
			return fmt.Errorf("error frame: %s", f.Status)
		case "RESET":
			c.resets++
			c.objects = map[string]string{}
			inSnapshot = true
		case "ADDED", "MODIFIED":
			c.objects[f.Object.Metadata.Name] = f.RV
			c.lastRV = f.RV
		case "DELETED":
			delete(c.objects, f.Object.Metadata.Name)
			c.lastRV = f.RV
		case "END_OF_SNAPSHOT":
			inSnapshot = false
			c.lastRV = f.RV
		}
		return nil
	}
	for {
		var f wsFrame
		if err := wsjson.Read(ctx, conn, &f); err != nil {
			return fmt.Errorf("not converged (diff -got +want):\n%s: %w", cmp.Diff(c.objects, want), err)
		}
		if err := handle(f); err != nil {
			return err
		}
		if !inSnapshot && maps.Equal(c.objects, want) {
			return conn.Close(websocket.StatusNormalClosure, "")
		}
	}
}
func (c *wsClient) restarts() int           { return c.resets }
func (c *wsClient) copy() map[string]string { return c.objects }

func truth(t *testing.T, env *testenv.Env, ns string) map[string]string {
	t.Helper()
	l, err := env.Client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range l.Items {
		out[o.Name] = o.ResourceVersion
	}
	return out
}

// TestReplicasResume: a client follows replica A, goes away while objects
// are deleted, changed and created, and comes back to replica B with its
// last resourceVersion. If B's history reaches back that far it resumes;
// if B started later it answers 410 and the client lists again. Either
// way the client ends with exactly the apiserver's objects: no missed
// deletes.
func TestReplicasResume(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		name        string
		client      func(ns string) client
		bStartsLate bool // B starts after the client left A
		wantRelists int
	}{
		{name: "rest/resume", client: func(ns string) client { return &restClient{m: mirror{ns: ns}} }},
		{name: "rest/fresh replica answers 410", client: func(ns string) client { return &restClient{m: mirror{ns: ns}} }, bStartsLate: true, wantRelists: 1},
		{name: "ws/resume", client: func(ns string) client { return &wsClient{ns: ns} }},
		{name: "ws/fresh replica answers RESET", client: func(ns string) client { return &wsClient{ns: ns} }, bStartsLate: true, wantRelists: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			opts := gatewayOptions{Resources: []string{"configmaps"}}
			a := startGateway(t, env.Config, opts)
			var b *gateway
			if !tc.bStartsLate {
				// B's history starts at its first list, before the
				// client's first resourceVersion.
				b = startGateway(t, env.Config, opts)
				waitReady(t, b)
			}
			cms := env.Client.CoreV1().ConfigMaps(ns)
			for i := range 5 {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			c := tc.client(ns)
			waitReady(t, a)
			if err := c.sync(ctx, a, truth(t, env, ns)); err != nil {
				t.Fatalf("replica A: %v", err)
			}

			// The client is away: deletes, an update and a create.
			for _, n := range []string{"c1", "c2"} {
				if err := cms.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c3"}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c5"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			want := truth(t, env, ns)

			if tc.bStartsLate {
				b = startGateway(t, env.Config, opts)
			}
			waitReady(t, b)
			if err := c.sync(ctx, b, want); err != nil {
				t.Fatalf("replica B: %v", err)
			}
			if c.restarts() != tc.wantRelists {
				t.Errorf("restarts (410 or RESET) = %d, want %d", c.restarts(), tc.wantRelists)
			}
			for _, n := range []string{"c1", "c2"} {
				if _, ok := c.copy()[n]; ok {
					t.Errorf("deleted %s is still in the client's copy", n)
				}
			}
		})
	}
}

// waitReady waits for the gateway's boot resources to sync and their
// live tables to be built (/readyz 200), and fails the test if they do
// not within testenv's bound.
func waitReady(t *testing.T, g *gateway) {
	t.Helper()
	status := "no answer"
	testenv.EventuallyShowing(t, "/readyz 200", func() bool {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status = err.Error()
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.Status + ": " + string(b)
		return resp.StatusCode == http.StatusOK
	}, func() string { return status })
}
