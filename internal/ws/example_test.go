package ws_test

import (
	"context"

	"golang.org/x/sync/errgroup"

	"kubegate/internal/auth"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/ws"
)

// The server is an http.Handler mounted at /ws by the HTTP server (behind
// its authentication), and runs next to it so that shutdown closes every
// socket with 1001.
func ExampleNew() {
	run := func(ctx context.Context, mgr *informer.Manager, authz auth.Authorizer) error {
		wsServer, err := ws.New(ws.Options{Manager: mgr, Authorizer: authz, AllowedOrigins: []string{"dashboard.example.com"}})
		if err != nil {
			return err
		}
		httpServer, err := httpapi.New(httpapi.Options{Manager: mgr, Authorizer: authz, WebSocket: wsServer})
		if err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return mgr.Start(ctx) })
		g.Go(func() error { return httpServer.Start(ctx) })
		g.Go(func() error { return wsServer.Start(ctx) })
		return g.Wait()
	}
	_ = run
}
