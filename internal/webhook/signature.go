package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names (https://www.standardwebhooks.com/).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sign returns the webhook-signature header value for one message: a
// "v1,<base64 HMAC-SHA256>" entry per secret over "id.timestamp.body",
// separated by spaces, so a receiver holding any one of the secrets can
// verify it while keys rotate.
func Sign(secrets [][]byte, id string, timestamp int64, body []byte) string {
	var b strings.Builder
	for i, key := range secrets {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body)))
	}
	return b.String()
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(timestamp, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verification errors.
var (
	ErrMissingHeaders   = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrInvalidTimestamp = errors.New("webhook: invalid webhook-timestamp")
	ErrTimestampSkew    = errors.New("webhook: webhook-timestamp outside the tolerance")
	ErrNoMatch          = errors.New("webhook: no signature matches")
)

// Verify checks a received request the way a receiver should: the
// timestamp is within tolerance of now (replay protection) and at least one
// v1 signature in the header matches one of secrets (decoded keys, see
// DecodeSecret) in constant time. body is the raw request
// body, before any JSON decoding. It depends only on the standard library
// so receivers can copy it.
func Verify(secrets [][]byte, h http.Header, body []byte, tolerance time.Duration) error {
	return verifyAt(secrets, h, body, tolerance, time.Now())
}

func verifyAt(secrets [][]byte, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if skew := math.Abs(float64(now.Unix() - sec)); skew > tolerance.Seconds() {
		return ErrTimestampSkew
	}
	for _, key := range secrets {
		want := mac(key, id, sec, body)
		for _, s := range strings.Fields(sigs) {
			version, b64, ok := strings.Cut(s, ",")
			if !ok || version != "v1" {
				continue // other schemes (e.g. v1a asymmetric) are not ours
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatch
}
