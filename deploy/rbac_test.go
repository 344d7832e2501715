package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/namespaces"
	"kubegate/internal/testenv"
)

// rbacCheck is one thing the gateway does with its own identity.
type rbacCheck struct {
	name string
	run  func(ctx context.Context, g *gatewayIdentity) error
}

// gatewayIdentity is a ServiceAccount bound to one ClusterRole and
// nothing else, with the gateway parts running as it.
type gatewayIdentity struct {
	cfg *rest.Config
	gw  *gateway
	// ns is a namespace where alice may list pods.
	ns    string
	alice string // alice's bearer token
}

// checks returns the named checks for the shipped config: the informer
// of every cache resource syncs, TokenReview and SubjectAccessReview
// work, and a user is served.
func checks(resources []string) []rbacCheck {
	var cs []rbacCheck
	for _, r := range resources {
		cs = append(cs, rbacCheck{"cache " + r, func(ctx context.Context, g *gatewayIdentity) error {
			res, err := g.gw.mgr.Resource(ctx, r)
			if err != nil {
				return err
			}
			return res.WaitForSync(ctx)
		}})
	}
	cs = append(cs,
		rbacCheck{"tokenreview", func(ctx context.Context, g *gatewayIdentity) error {
			tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: kubernetes.NewForConfigOrDie(g.cfg), SuccessTTL: -1, FailureTTL: -1})
			if err != nil {
				return err
			}
			u, err := tr.AuthenticateToken(ctx, g.alice)
			if err != nil {
				return err
			}
			if u.Name != "alice" {
				return fmt.Errorf("token reviewed as %q, want alice", u.Name)
			}
			return nil
		}},
		rbacCheck{"subjectaccessreview", func(ctx context.Context, g *gatewayIdentity) error {
			sar, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
				Client: kubernetes.NewForConfigOrDie(g.cfg), Namespaces: namespaces.FromInformer(g.gw.mgr),
				AllowTTL: -1, DenyTTL: -1, ScanTTL: -1,
			})
			if err != nil {
				return err
			}
			_, err = sar.Authorize(ctx, &auth.User{Name: "alice", Groups: []string{"kubegate:readers"}}, auth.Request{
				Verb: "list", Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespaced: true, Namespace: g.ns,
			})
			return err
		}},
		rbacCheck{"serve alice pods cluster-wide", func(ctx context.Context, g *gatewayIdentity) error {
			// Cluster-wide, so it is narrowed to the namespaces alice may
			// read: TokenReview, SubjectAccessReview and the namespaces
			// and pods informers all take part.
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.gw.url+"/api/v1/pods", nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+g.alice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /api/v1/pods as alice: %s: %s", resp.Status, body)
			}
			return nil
		}},
	)
	return cs
}

// TestClusterRoleExactlyEnough runs the gateway as a ServiceAccount bound
// only to the shipped ClusterRole: every check passes. Then, for each
// resource and verb of each rule, a ClusterRole without it makes the named
// check fail.
func TestClusterRoleExactlyEnough(t *testing.T) {
	env := testenv.Get(t)
	ns, alice := alicePodReader(t, env)
	for _, dir := range []string{"../deploy", "../deploy/overlays/restricted"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			role, resources := clusterRole(t, dir)
			exactlyEnough(t, env, dir, role, resources, ns, alice)
		})
	}
}

// alicePodReader returns a namespace where alice may read pods, and
// nothing else, and alice's bearer token.
func alicePodReader(t *testing.T, env *testenv.Env) (ns, alice string) {
	t.Helper()
	ns = env.Namespace(t)
	alice = env.CP.UserConfig("alice").BearerToken
	// (No Role "view": its rules are aggregated by a controller the test
	// apiserver lacks.)
	ctx := t.Context()
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns, alice
}

// exactlyEnough checks that role, shipped as source says, grants exactly
// what a gateway watching resources needs.
func exactlyEnough(t *testing.T, env *testenv.Env, source string, role *rbacv1.ClusterRole, resources []string, ns, alice string) {
	all := checks(resources)
	byName := map[string]rbacCheck{}
	for _, c := range all {
		byName[c.name] = c
	}

	t.Run("shipped", func(t *testing.T) {
		id := runAs(t, env, ns, alice, source+" shipped", role.Rules, resources)
		for _, c := range all {
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			// The SubjectAccessReview for alice depends on her
			// RoleBinding reaching the apiserver's RBAC cache.
			err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				return c.run(ctx, id) == nil, nil
			})
			cancel()
			if err != nil {
				t.Errorf("%s: %v", c.name, c.run(t.Context(), id))
			}
		}
	})

	type variant struct {
		name  string
		rules []rbacv1.PolicyRule
		fails string // the check that must fail
	}
	var variants []variant
	for i, rule := range role.Rules {
		for j, res := range rule.Resources {
			rules := cloneRules(role.Rules)
			rules[i].Resources = slices.Delete(slices.Clone(rule.Resources), j, j+1)
			if len(rules[i].Resources) == 0 {
				rules = slices.Delete(rules, i, i+1)
			}
			fails := ""
			switch res {
			case "tokenreviews":
				fails = "tokenreview"
			case "subjectaccessreviews":
				fails = "subjectaccessreview"
			default:
				for _, r := range resources {
					info, err := resolve(env, r)
					if err != nil {
						t.Fatal(err)
					}
					if info.Group == firstOr(rule.APIGroups) && info.Resource == res {
						fails = "cache " + r
					}
				}
			}
			if fails == "" {
				t.Errorf("rule %d grants %s, which no cache resource or check uses", i, res)
				continue
			}
			variants = append(variants, variant{"without " + res, rules, fails})
		}
		if len(rule.Verbs) > 1 {
			for j, verb := range rule.Verbs {
				rules := cloneRules(role.Rules)
				rules[i].Verbs = slices.Delete(slices.Clone(rule.Verbs), j, j+1)
				variants = append(variants, variant{fmt.Sprintf("without %s on %v", verb, rule.Resources), rules, "cache " + firstCached(t, env, rule, resources)})
			}
		}
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			c, ok := byName[v.fails]
			if !ok {
				t.Fatalf("no check named %q", v.fails)
			}
			id := runAs(t, env, ns, alice, source+" "+v.name, v.rules, resources)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := c.run(ctx, id)
			if err == nil {
				t.Fatalf("%s passed without the rule", c.name)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s hung instead of failing: %v", c.name, err)
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}

func cloneRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = *r.DeepCopy()
	}
	return out
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func resolve(env *testenv.Env, name string) (schema.GroupVersionResource, error) {
	m, err := informer.New(informer.Options{Config: env.Config})
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	info, err := m.Resolve(context.Background(), name)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return info.GVR, nil
}

// firstCached is a cache resource granted by rule.
func firstCached(t *testing.T, env *testenv.Env, rule rbacv1.PolicyRule, resources []string) string {
	t.Helper()
	for _, r := range resources {
		gvr, err := resolve(env, r)
		if err != nil {
			t.Fatal(err)
		}
		if gvr.Group == firstOr(rule.APIGroups) && slices.Contains(rule.Resources, gvr.Resource) {
			return r
		}
	}
	t.Fatalf("no cache resource is granted by %v", rule)
	return ""
}

// runAs creates a ServiceAccount bound only to a ClusterRole with rules
// (and a marker rule to see when the binding is in force), and runs a
// gateway as it with the given cache resources started lazily.
func runAs(t *testing.T, env *testenv.Env, ns, alice, variant string, rules []rbacv1.PolicyRule, resources []string) *gatewayIdentity {
	t.Helper()
	ctx := t.Context()
	name := fmt.Sprintf("kubegate-%08x", hash(variant))
	marker := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name}, Verbs: []string{"get"}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: append(cloneRules(rules), marker)}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tok.Status.Token
	cs := kubernetes.NewForConfigOrDie(cfg)
	// Wait for the binding to be in force, so a check that fails does so
	// for the missing rule, not for a binding the apiserver has not seen.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Resource: "configmaps", Namespace: ns, Name: name,
			}},
		}, metav1.CreateOptions{})
		return err == nil && rev.Status.Allowed, nil
	}); err != nil {
		t.Fatalf("the binding for %s never took effect: %v", name, err)
	}
	return &gatewayIdentity{cfg: cfg, gw: startGateway(t, cfg, gatewayOptions{RBAC: true}), ns: ns, alice: alice}
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}
