package informer

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// accessCheck is the default Options.canList: before a resource's
// informer starts, a SelfSubjectAccessReview asks the upstream whether
// the gateway may list and watch the resource in all namespaces, so a
// forbidden resource fails at once instead of never syncing.
//
// An upstream without the authorization API (another kubegate, which
// serves only reads, in a tiered deployment) answers the review 404 or
// 405. The check is then off for the Manager's lifetime, said once in the
// log, and a resource the upstream refuses fails at its list instead (see
// Resource.WaitForSync). The review's own answer never reaches a client:
// it is about another request than the client's.
type accessCheck struct {
	reviews authorizationclient.SelfSubjectAccessReviewInterface
	log     *zap.Logger
	host    string

	// off is set once the upstream has shown it does not serve the
	// reviews; offOnce logs it.
	off     atomic.Bool
	offOnce sync.Once
}

func newAccessCheck(reviews authorizationclient.SelfSubjectAccessReviewInterface, log *zap.Logger, host string) *accessCheck {
	return &accessCheck{reviews: reviews, log: log, host: host}
}

// canList returns nil when the gateway may list and watch gvr cluster-wide
// or the upstream cannot say, a *GatewayForbiddenError when it may not,
// and an *AccessCheckError when the review failed.
func (c *accessCheck) canList(ctx context.Context, gvr schema.GroupVersionResource) error {
	if c.off.Load() {
		return nil
	}
	for _, verb := range []string{"list", "watch"} {
		rev, err := c.reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
			}},
		}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			c.offOnce.Do(func() {
				c.off.Store(true)
				c.log.Info("the upstream does not serve SelfSubjectAccessReview (it may be another kubegate); "+
					"resources start without checking the gateway's access first, and one the upstream refuses fails at its list",
					zap.String("upstream", c.host), zap.Error(err))
			})
			return nil
		}
		if err != nil {
			return &AccessCheckError{GVR: gvr, Err: err}
		}
		if !rev.Status.Allowed {
			return &GatewayForbiddenError{GVR: gvr, Verb: verb, Reason: rev.Status.Reason}
		}
	}
	return nil
}

// AccessCheckError reports that the review of the gateway's own access to
// a resource could not be made (the upstream refused the review itself,
// failed, or was unreachable).
type AccessCheckError struct {
	GVR schema.GroupVersionResource
	Err error
}

func (e *AccessCheckError) Error() string {
	return fmt.Sprintf("cannot check the gateway's access to %s: %v", e.GVR.GroupResource(), e.Err)
}

func (e *AccessCheckError) Unwrap() error { return e.Err }

// Status implements apierrors.APIStatus: 503, whatever the review's own
// status was. That status answered the gateway's review, not the client's
// request: passed through, a 405 or 403 would tell the client something
// false about its own request.
func (e *AccessCheckError) Status() metav1.Status {
	return failure(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, e.Error())
}

var _ apierrors.APIStatus = (*AccessCheckError)(nil)
