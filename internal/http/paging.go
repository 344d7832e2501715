package httpapi

import (
	"bytes"
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
//	base64url( version[1] | issuer[8] | id[16] | offset[8] | hmac-sha256(key, all before)[16] )
//
// The snapshot (the sorted object pointers of the first request) stays in
// memory for pageTTL, so every page of one sequence comes from the same
// consistent view, as with the apiserver's etcd-backed pages. The MAC
// makes tokens unforgeable; the snapshot records the request it answered
// (resource, namespace, selectors, user), so a token replayed against
// another request is refused.
//
// issuer is drawn at startup like the key. It tells a token this pager
// issued (checked fully: a bad MAC is 400) from a well-formed token of
// another replica or of an earlier run, whose snapshot cannot be here:
// that one answers 410 Expired like a token whose snapshot timed out, so
// client-go's pager falls back to a full list by itself. A forger who
// invents an issuer gains nothing by it: a 410 only tells a client to
// list again.
const (
	tokenVersion   = 1
	tokenIssuerLen = 8
	tokenIDLen     = 16
	tokenMACLen    = 16
	tokenLen       = 1 + tokenIssuerLen + tokenIDLen + 8 + tokenMACLen
	// legacyTokenLen is the length of the unversioned tokens of earlier
	// gateway versions (id, offset, MAC): well-formed, never valid here.
	legacyTokenLen = tokenIDLen + 8 + tokenMACLen
	tokenIDOff     = 1 + tokenIssuerLen
	tokenOffsetOff = tokenIDOff + tokenIDLen
	tokenMACOff    = tokenOffsetOff + 8
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
	key    []byte
	issuer [tokenIssuerLen]byte
	ttl    time.Duration
	max    int
	clock  clock.PassiveClock

	// mu guards snaps and order.
	mu    sync.Mutex
	snaps map[[tokenIDLen]byte]*pageSnapshot
	order [][tokenIDLen]byte // creation order, oldest first
}

func newPager(ttl time.Duration, max int, clk clock.PassiveClock) *pager {
	p := &pager{key: make([]byte, 32), ttl: ttl, max: max, clock: clk, snaps: map[[tokenIDLen]byte]*pageSnapshot{}}
	_, _ = rand.Read(p.key)
	_, _ = rand.Read(p.issuer[:])
	return p
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
	b[0] = tokenVersion
	copy(b[1:], p.issuer[:])
	copy(b[tokenIDOff:], id[:])
	binary.BigEndian.PutUint64(b[tokenOffsetOff:], uint64(offset))
	copy(b[tokenMACOff:], p.mac(b[:tokenMACOff]))
	return base64.RawURLEncoding.EncodeToString(b)
}

func (p *pager) mac(b []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write(b)
	return m.Sum(nil)[:tokenMACLen]
}

// next returns the snapshot and offset a token names:
//   - a token that is not one (bad encoding, length or version), or that
//     this pager issued but that was altered, is 400;
//   - a well-formed token of another replica or of an earlier run is 410
//     Expired, as is one whose snapshot is gone;
//   - a token from another request (resource, namespace, selector or
//     user) is 400.
func (p *pager) next(token, scope string) (*pageSnapshot, [tokenIDLen]byte, int, *metav1.Status) {
	var id [tokenIDLen]byte
	b, err := base64.RawURLEncoding.DecodeString(token)
	switch {
	case err == nil && len(b) == legacyTokenLen:
		return nil, id, 0, foreignToken()
	case err != nil || len(b) != tokenLen || b[0] != tokenVersion:
		return nil, id, 0, badRequest("invalid continue token: malformed; pass the metadata.continue of the previous page unchanged, or list again without continue")
	case !bytes.Equal(b[1:tokenIDOff], p.issuer[:]):
		return nil, id, 0, foreignToken()
	case !hmac.Equal(p.mac(b[:tokenMACOff]), b[tokenMACOff:]):
		return nil, id, 0, badRequest("invalid continue token: it was altered; pass the metadata.continue of the previous page unchanged, or list again without continue")
	}
	copy(id[:], b[tokenIDOff:])
	off := binary.BigEndian.Uint64(b[tokenOffsetOff:])
	p.mu.Lock()
	s := p.snaps[id]
	p.mu.Unlock()
	if s == nil || !p.clock.Now().Before(s.expires) {
		return nil, id, 0, apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"the continue token has expired: list snapshots are kept for "+p.ttl.String()+"; start the list again without continue")
	}
	if s.scope != scope {
		return nil, id, 0, badRequest("invalid continue token: it was issued for a different request (resource, namespace, selectors and user must stay the same)")
	}
	if off > uint64(len(s.objs)) {
		return nil, id, 0, badRequest("invalid continue token: offset out of range")
	}
	return s, id, int(off), nil
}

// isPagerToken reports whether tok has the shape of a pager's continue
// token, this version's or an earlier one's, whoever issued it.
func isPagerToken(tok string) bool {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	return err == nil && (len(b) == tokenLen && b[0] == tokenVersion || len(b) == legacyTokenLen)
}

// foreignToken is the answer to a well-formed token this pager did not
// issue.
func foreignToken() *metav1.Status {
	return apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
		"the continue token has expired: it was issued by another gateway replica or before a restart, "+
			"and list snapshots live only in the memory of the replica that made them; start the list again without continue")
}

// mustID returns the snapshot id of a token next has accepted.
func (p *pager) mustID(token string) [tokenIDLen]byte {
	var id [tokenIDLen]byte
	b, _ := base64.RawURLEncoding.DecodeString(token)
	copy(id[:], b[tokenIDOff:])
	return id
}
