package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary signature headers and bodies to the receiver
// check: it must never panic, and it must accept only a header that carries
// a signature Sign produced for exactly this id, timestamp and body.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	secret := []byte("0123456789abcdef0123456789abcdef")
	good := Sign([][]byte{secret}, "msg_1", now.Unix(), []byte(`{"a":1}`))
	f.Add("msg_1", strconv.FormatInt(now.Unix(), 10), good, []byte(`{"a":1}`))
	f.Add("msg_1", strconv.FormatInt(now.Unix(), 10), "v1,"+good[3:]+" v1a,xyz", []byte(`{"a":2}`))
	f.Add("", "x", "v1", []byte{})
	f.Add("id", "-99999999999999999999", "v1,!!!", []byte("\x00"))
	f.Fuzz(func(t *testing.T, id, ts, sigs string, body []byte) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sigs)
		err := verifyAt([][]byte{secret}, h, body, 5*time.Minute, now)
		if err != nil {
			return
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil {
			t.Fatalf("accepted a non-numeric timestamp %q", ts)
		}
		want := mac(secret, h.Get(HeaderID), sec, body)
		for _, field := range strings.Fields(h.Get(HeaderSignature)) {
			if v, b64, ok := strings.Cut(field, ","); ok && v == "v1" {
				if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
					return
				}
			}
		}
		t.Fatalf("accepted %q, which carries no valid signature", sigs)
	})
}
