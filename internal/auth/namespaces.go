package auth

import (
	"context"
	"fmt"

	"kubegate/internal/informer"
)

// InformerNamespaces lists namespaces from the gateway's own namespaces
// informer (started on first use), so computing a user's namespace set
// costs no apiserver list. The gateway needs list and watch on
// namespaces for it.
func InformerNamespaces(m *informer.Manager) NamespaceLister {
	return NamespaceListerFunc(func(ctx context.Context) ([]string, error) {
		r, err := m.Resource(ctx, "namespaces")
		if err != nil {
			return nil, fmt.Errorf("namespaces informer: %w", err)
		}
		if err := r.WaitForSync(ctx); err != nil {
			return nil, fmt.Errorf("namespaces informer: %w", err)
		}
		objs, _ := r.List(&informer.Filter{})
		names := make([]string, len(objs))
		for i, o := range objs {
			names[i] = o.Name
		}
		return names, nil
	})
}
