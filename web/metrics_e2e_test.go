package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/auth"
)

// noMetrics allows every read but not the path /metrics, as RBAC does for
// a reader without a nonResourceURLs grant.
type noMetrics struct{ auth.AlwaysAllow }

func (noMetrics) AuthorizeNonResource(_ context.Context, u *auth.User, verb, path string) error {
	return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot %s path %q", u.Name, verb, path))
}

// A reader who may not get /metrics sees why in the status view, and
// still sees readiness and the informers with their states, not zeros,
// and not their object counts, which /readyz keeps for those who may
// read /metrics.
func TestDashboardStatusWithoutMetrics(t *testing.T) {
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{wrapAuthorizer: func(auth.Authorizer) auth.Authorizer { return noMetrics{} }})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "connected", `kubegate.connection === "connected"`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#status-toggle`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "status view without metrics", `(() => {
		const rows = [...document.querySelectorAll("#informers tbody tr")].map((r) => r.innerText);
		const dl = document.getElementById("status-summary").innerText;
		return /Ready\s+yes/.test(dl) && /Metrics\s+forbidden: User "system:anonymous" cannot get path "\/metrics"/.test(dl) &&
			!/Sockets/.test(dl) && rows.some((r) => r.startsWith("configmaps\tok")) && !rows.some((r) => /\t\d+\t/.test(r));
	})()`)
}
