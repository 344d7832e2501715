package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// BenchmarkWebSocketFanout measures one change reaching every subscriber
// (apiserver write → event on each socket) with --authz=rbac against
// --authz=always-allow. Authorization is not on the per-event path at all
// (only at subscribe and every re-check), so the two should be equal.
// Subscriptions are cluster-wide; with rbac each is narrowed to the one
// namespace the users' group may read, which is the expensive case.
func BenchmarkWebSocketFanout(b *testing.B) {
	const users = 10
	for _, subscribers := range []int{100} {
		for _, authz := range []string{"always-allow", "rbac"} {
			b.Run(fmt.Sprintf("authz=%s/subscribers=%d/users=%d", authz, subscribers, users), func(b *testing.B) {
				benchFanout(b, authz, subscribers, users)
			})
		}
	}
}

func benchFanout(b *testing.B, authz string, subscribers, users int) {
	env := testenv.Get(b)
	ns := env.Namespace(b)
	ctx := b.Context()
	var csv strings.Builder
	for i := range users {
		fmt.Fprintf(&csv, "bench-token-%d,bench-%d,bench-%d,kubegate-bench\n", i, i, i)
	}
	tokens, err := auth.ParseTokenFile(strings.NewReader(csv.String()))
	if err != nil {
		b.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "kubegate-bench"}}}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "fanout"}, Data: map[string]string{"seq": "0"}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// The default re-check period, so its cost is part of the run.
	g := startGatewayWith(b, gatewayOptions{log: zap.NewNop(), tokens: tokens, alwaysAllow: authz == "always-allow", recheck: 5 * time.Second})

	// Every subscriber reads on its own goroutine and reports each
	// change of the ConfigMap on got.
	got := make(chan struct{}, subscribers)
	readCtx, stopReading := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	b.Cleanup(func() { stopReading(); readers.Wait() })
	for i := range subscribers {
		c, _, err := g.dial(b, http.Header{"Authorization": {fmt.Sprintf("Bearer bench-token-%d", i%users)}})
		if err != nil {
			b.Fatal(err)
		}
		c.send(map[string]any{"type": "subscribe", "id": "cm", "resource": "configmaps", "sendInitialEvents": false})
		if f := c.next(30 * time.Second); f.Type != "ack" {
			b.Fatalf("subscriber %d: %+v", i, f)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				_, data, err := c.c.Read(readCtx)
				if err != nil {
					return
				}
				var f frame
				if json.Unmarshal(data, &f) != nil {
					continue
				}
				for _, e := range append(f.Events, f) {
					if e.Type == "MODIFIED" {
						got <- struct{}{}
					}
				}
			}
		}()
	}

	seq := 0
	for b.Loop() {
		seq++
		cm.Data["seq"] = fmt.Sprint(seq)
		if cm, err = env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
		for range subscribers {
			select {
			case <-got:
			case <-timeout:
				b.Fatalf("change %d did not reach every subscriber", seq)
			}
		}
	}
	b.ReportMetric(float64(subscribers), "deliveries/op")
}
