package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/informer"
)

// A continue token names a stored snapshot and an offset into it:
//
//	base64url( id[16] | offset[8] | hmac-sha256(key, id|offset)[16] )
//
// The snapshot (the sorted object pointers of the first request) stays in
// memory for pageTTL, so every page of one sequence comes from the same
// consistent view, as with the apiserver's etcd-backed pages. The MAC
// makes tokens unforgeable; the snapshot records the request it answered
// (resource, namespace, selectors, user), so a token replayed against
// another request is refused.
const (
	tokenIDLen  = 16
	tokenMACLen = 16
	tokenLen    = tokenIDLen + 8 + tokenMACLen
)

// pageSnapshot is one list result kept for its continue tokens. It is
// immutable after creation.
type pageSnapshot struct {
	scope   string
	objs    []*informer.Object
	rv      uint64
	expires time.Time
}

// pager keeps list snapshots for continue tokens.
//
// It has no goroutine: expired snapshots are dropped when snapshots are
// added.
type pager struct {
	key   []byte
	ttl   time.Duration
	max   int
	clock clock.PassiveClock

	// mu guards snaps and order.
	mu    sync.Mutex
	snaps map[[tokenIDLen]byte]*pageSnapshot
	order [][tokenIDLen]byte // creation order, oldest first
}

func newPager(ttl time.Duration, max int, clk clock.PassiveClock) *pager {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &pager{key: key, ttl: ttl, max: max, clock: clk, snaps: map[[tokenIDLen]byte]*pageSnapshot{}}
}

// store keeps objs and returns the token for the page starting at offset.
func (p *pager) store(scope string, objs []*informer.Object, rv uint64, offset int) string {
	var id [tokenIDLen]byte
	_, _ = rand.Read(id[:])
	now := p.clock.Now()
	p.mu.Lock()
	for len(p.order) > 0 {
		oldest := p.order[0]
		s := p.snaps[oldest]
		if s != nil && now.Before(s.expires) && len(p.order) < p.max {
			break
		}
		delete(p.snaps, oldest)
		p.order = p.order[1:]
	}
	p.snaps[id] = &pageSnapshot{scope: scope, objs: objs, rv: rv, expires: now.Add(p.ttl)}
	p.order = append(p.order, id)
	p.mu.Unlock()
	return p.token(id, offset)
}

func (p *pager) token(id [tokenIDLen]byte, offset int) string {
	b := make([]byte, tokenLen)
	copy(b, id[:])
	binary.BigEndian.PutUint64(b[tokenIDLen:], uint64(offset))
	copy(b[tokenIDLen+8:], p.mac(b[:tokenIDLen+8]))
	return base64.RawURLEncoding.EncodeToString(b)
}

func (p *pager) mac(b []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write(b)
	return m.Sum(nil)[:tokenMACLen]
}

// next returns the snapshot and offset a token names. A token that was
// not issued here is 400; a token whose snapshot is gone is 410 Expired;
// a token from another request (resource, namespace, selector or user) is
// 400.
func (p *pager) next(token, scope string) (*pageSnapshot, [tokenIDLen]byte, int, *metav1.Status) {
	var id [tokenIDLen]byte
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != tokenLen || !hmac.Equal(p.mac(b[:tokenIDLen+8]), b[tokenIDLen+8:]) {
		return nil, id, 0, badRequest("invalid continue token: it was not issued by this gateway (tokens do not survive a restart); list again without continue")
	}
	copy(id[:], b)
	off := binary.BigEndian.Uint64(b[tokenIDLen:])
	p.mu.Lock()
	s := p.snaps[id]
	p.mu.Unlock()
	if s == nil || !p.clock.Now().Before(s.expires) {
		return nil, id, 0, apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"the continue token has expired: list snapshots are kept for "+p.ttl.String()+"; list again without continue")
	}
	if s.scope != scope {
		return nil, id, 0, badRequest("invalid continue token: it was issued for a different request (resource, namespace, selectors and user must stay the same)")
	}
	if off > uint64(len(s.objs)) {
		return nil, id, 0, badRequest("invalid continue token: offset out of range")
	}
	return s, id, int(off), nil
}

// mustID returns the snapshot id of a token next has accepted.
func (p *pager) mustID(token string) [tokenIDLen]byte {
	var id [tokenIDLen]byte
	b, _ := base64.RawURLEncoding.DecodeString(token)
	copy(id[:], b)
	return id
}
