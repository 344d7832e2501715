package scenario

import (
	"bytes"
	"encoding/binary"

	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// kube-apiserver's protobuf watch stream
// (application/vnd.kubernetes.protobuf;stream=watch) is a sequence of
// frames: a 4-byte big-endian length, then a metav1.WatchEvent
// {1: type, 2: object {1: raw}}. The raw object is "k8s\x00" followed by a
// runtime.Unknown {2: raw}, whose raw is the Pod {1: metadata}, whose
// field 6 is resourceVersion. Only those fields are read.

var (
	errBadProto = errors.New("malformed protobuf")
	k8sMagic    = []byte("k8s\x00")
)

// readProtoFrame reads one frame into buf (grown as needed).
func readProtoFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > 64<<20 {
		return buf, fmt.Errorf("protobuf frame of %d bytes", n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// scanProtoEvent returns a watch event's type and its object's
// resourceVersion.
func scanProtoEvent(frame []byte) (typ []byte, rv uint64, err error) {
	typ, ok := pbBytes(frame, 1)
	if !ok {
		return nil, 0, errBadProto
	}
	obj, ok := pbBytes(frame, 2)
	if !ok {
		return typ, 0, errBadProto
	}
	raw, ok := pbBytes(obj, 1)
	if !ok || !bytes.HasPrefix(raw, k8sMagic) {
		return typ, 0, errBadProto
	}
	pod, ok := pbBytes(raw[len(k8sMagic):], 2)
	if !ok {
		return typ, 0, errBadProto
	}
	meta, ok := pbBytes(pod, 1)
	if !ok {
		return typ, 0, errBadProto
	}
	v, ok := pbBytes(meta, 6)
	if !ok {
		return typ, 0, errBadProto
	}
	rv, err = strconv.ParseUint(string(v), 10, 64)
	return typ, rv, err
}

// pbBytes returns the first length-delimited field num of message b.
func pbBytes(b []byte, num protowire.Number) ([]byte, bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			return v, l >= 0
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return nil, false
		}
		b = b[l:]
	}
	return nil, false
}
