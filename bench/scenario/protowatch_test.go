package scenario

import (
	"bytes"
	"encoding/binary"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"kubegate/bench/workload"
)

// TestScanProtoEvent frames a watch event as kube-apiserver writes it
// (client-go's protobuf serializer for the Pod, metav1.WatchEvent around
// it, a 4-byte length before it) and reads its type and the Pod's
// resourceVersion back.
func TestScanProtoEvent(t *testing.T) {
	pod := workload.NewPod(workload.PodAt(7, 10), 7)
	pod.ResourceVersion = "12345"
	pod.Kind, pod.APIVersion = "Pod", "v1"
	var raw bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(pod, &raw); err != nil {
		t.Fatal(err)
	}
	ev := metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: raw.Bytes()}}
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	for range 2 {
		stream.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
		stream.Write(b)
	}
	var buf []byte
	for i := range 2 {
		if buf, err = readProtoFrame(&stream, buf); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		typ, rv, err := scanProtoEvent(buf)
		if err != nil || string(typ) != "MODIFIED" || rv != 12345 {
			t.Errorf("frame %d: scanProtoEvent = %s, %d, %v; want MODIFIED, 12345", i, typ, rv, err)
		}
	}
	if _, err := readProtoFrame(&stream, buf); err == nil {
		t.Error("read a frame past the end")
	}
	for name, frame := range map[string][]byte{
		"truncated":      b[:len(b)/2],
		"no k8s magic":   mustMarshal(t, metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte("json")}}),
		"not a protobuf": []byte{0xff, 0xff, 0xff},
	} {
		if _, _, err := scanProtoEvent(frame); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func mustMarshal(t *testing.T, ev metav1.WatchEvent) []byte {
	t.Helper()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
