package webhook

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The example from the Standard Webhooks specification and its reference
// libraries' tests.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustKey(t testing.TB, s string) []byte {
	t.Helper()
	k, err := DecodeSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignSpecVector(t *testing.T) {
	key := mustKey(t, specSecret)
	if got := Sign([][]byte{key}, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("Sign = %s, want %s", got, specSignature)
	}
}

func TestVerify(t *testing.T) {
	key := mustKey(t, specSecret)
	other := mustKey(t, "whsec_"+"QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB")
	now := time.Unix(specTimestamp, 0)
	headers := func(sig string, ts int64) http.Header {
		h := http.Header{}
		h.Set(HeaderID, specID)
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, sig)
		return h
	}
	rotated := Sign([][]byte{other, key}, specID, specTimestamp, []byte(specBody))
	for _, tc := range []struct {
		name    string
		secrets [][]byte
		h       http.Header
		body    string
		at      time.Time
		want    error
	}{
		{"spec vector", [][]byte{key}, headers(specSignature, specTimestamp), specBody, now, nil},
		{"rotation: new key in header", [][]byte{key}, headers(rotated, specTimestamp), specBody, now, nil},
		{"rotation: receiver has both", [][]byte{other, key}, headers(specSignature, specTimestamp), specBody, now, nil},
		{"v1a ignored", [][]byte{key}, headers("v1a,xyz "+specSignature, specTimestamp), specBody, now, nil},
		{"wrong key", [][]byte{other}, headers(specSignature, specTimestamp), specBody, now, ErrNoMatch},
		{"tampered body", [][]byte{key}, headers(specSignature, specTimestamp), `{"test": 1}`, now, ErrNoMatch},
		{"tampered timestamp", [][]byte{key}, headers(specSignature, specTimestamp+1), specBody, now, ErrNoMatch},
		{"too old", [][]byte{key}, headers(specSignature, specTimestamp), specBody, now.Add(6 * time.Minute), ErrTimestampSkew},
		{"too new", [][]byte{key}, headers(specSignature, specTimestamp), specBody, now.Add(-6 * time.Minute), ErrTimestampSkew},
		{"bad timestamp", [][]byte{key}, func() http.Header { h := headers(specSignature, 0); h.Set(HeaderTimestamp, "soon"); return h }(), specBody, now, ErrInvalidTimestamp},
		{"missing", [][]byte{key}, http.Header{}, specBody, now, ErrMissingHeaders},
		{"garbage signature", [][]byte{key}, headers("v1,!!!", specTimestamp), specBody, now, ErrNoMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := verifyAt(tc.secrets, tc.h, []byte(tc.body), 5*time.Minute, tc.at); err != tc.want {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
