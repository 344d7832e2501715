package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
)

// event is one notification rendered for a webhook. Its body and id are
// fixed when it is built, so every retry sends the same bytes under the
// same webhook-id; only webhook-timestamp and the signature change.
type event struct {
	id     string
	kind   string // added, modified, deleted, sync, reset or snapshot.end
	key    string // namespace/name, or the collection path of a marker; for logs
	body   []byte
	marker bool // reset or snapshot.end
}

// The markers around a snapshot that replaces what a receiver holds of
// one resource: reset, the current objects as added, snapshot.end. They
// are sent whatever eventTypes says: without them a receiver cannot tell
// what was deleted while it was not told.
const (
	kindReset       = "reset"
	kindSnapshotEnd = "snapshot.end"
)

// Annotations that tell the markers apart in the watch format, where both
// are BOOKMARKs. The second is the apiserver's own end of a watch-list's
// initial events.
const (
	annotationReset       = "kubegate.io/reset"
	annotationSnapshotEnd = "k8s.io/initial-events-end"
)

var eventKinds = map[informer.NotificationType]string{
	informer.Added:    "added",
	informer.Modified: "modified",
	informer.Deleted:  "deleted",
	informer.Sync:     "sync",
}

// eventID is stable for one change of one object: the same resource,
// object, resourceVersion and kind always give the same id, so a receiver
// can deduplicate redeliveries. Sync events carry the resync time as well,
// because an unchanged object is re-sent under the same resourceVersion.
func eventID(gvr schema.GroupVersionResource, n informer.Notification, kind string, at time.Time) string {
	h := sha256.New()
	o := n.Object
	for _, s := range []string{gvr.String(), o.Namespace, o.Name, string(o.UID), strconv.FormatUint(n.RV, 10), o.ResourceVersion, kind} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if n.Type == informer.Sync {
		h.Write([]byte(strconv.FormatInt(at.UnixNano(), 10)))
	}
	return "evt_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// objectPath is the object's apiserver path, used as the CloudEvents
// subject: /api/v1/namespaces/ns/configmaps/name.
func objectPath(gvr schema.GroupVersionResource, namespaced bool, o *informer.Object) string {
	return collectionPath(gvr, namespaced, o.Namespace) + "/" + o.Name
}

// collectionPath is the apiserver path listing the resource in namespace
// ns, or in all namespaces when ns is "": /api/v1/namespaces/ns/configmaps,
// /apis/apps/v1/deployments. It is the subject of the markers.
func collectionPath(gvr schema.GroupVersionResource, namespaced bool, ns string) string {
	p := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		p = "/api/" + gvr.Version
	}
	if namespaced && ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + gvr.Resource
}

// CloudEvents type prefix; the kind follows: io.kubegate.resource.added,
// io.kubegate.resource.snapshot.end.
const eventTypePrefix = "io.kubegate.resource."

// newEvent renders n. The object's JSON (Raw, encoded once when the
// informer received it) is spliced into the envelope as is.
func newEvent(info *informer.ResourceInfo, n informer.Notification, format, source string, at time.Time) event {
	kind := eventKinds[n.Type]
	ev := event{id: eventID(info.GVR, n, kind, at), kind: kind, key: n.Object.Key()}
	raw := n.Object.Raw
	switch format {
	case "watch":
		ev.body = appendWatch(make([]byte, 0, len(raw)+32), watchTypes[n.Type], raw)
	default:
		ev.body = appendCloudEvent(make([]byte, 0, len(raw)+256), ev.id, source, kind,
			objectPath(info.GVR, info.Namespaced, n.Object), at, raw)
	}
	return ev
}

// appendWatch appends a watch event around the object's JSON.
func appendWatch(b []byte, typ string, raw []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"object":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// appendCloudEvent appends a structured CloudEvent whose data is raw.
func appendCloudEvent(b []byte, id, source, kind, subject string, at time.Time, raw []byte) []byte {
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, source)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, eventTypePrefix+kind)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, subject)
	b = append(b, `,"time":`...)
	b = appendJSONString(b, at.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"datacontenttype":"application/json","data":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// markerObject is a marker's object: like the apiserver's BOOKMARK
// objects, the resource's apiVersion and kind with metadata only. It names
// the namespace the webhook's resource entry is limited to, if any, and
// for snapshot.end the resourceVersion the snapshot reflects.
type markerObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   markerMetadata `json:"metadata"`
}

type markerMetadata struct {
	Namespace       string            `json:"namespace,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Annotations     map[string]string `json:"annotations"`
}

// newMarker renders a reset (rv 0) or snapshot.end for the objects of
// in's resource entry. seq tells apart markers rendered at the same time.
func newMarker(in *input, kind string, rv uint64, format, source string, at time.Time, seq uint64) event {
	info := in.info
	obj := markerObject{
		APIVersion: info.GVK.GroupVersion().String(),
		Kind:       info.GVK.Kind,
		Metadata:   markerMetadata{Namespace: in.namespace, Annotations: map[string]string{annotationReset: "true"}},
	}
	if kind == kindSnapshotEnd {
		obj.Metadata.ResourceVersion = strconv.FormatUint(rv, 10)
		obj.Metadata.Annotations = map[string]string{annotationSnapshotEnd: "true"}
	}
	raw, _ := json.Marshal(obj) // strings and a map of strings always marshal

	h := sha256.New()
	for _, s := range []string{info.GVR.String(), in.collection, kind, strconv.FormatUint(rv, 10),
		strconv.FormatInt(at.UnixNano(), 10), strconv.FormatUint(seq, 10)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	ev := event{id: "evt_" + hex.EncodeToString(h.Sum(nil)[:16]), kind: kind, key: in.collection, marker: true}
	switch format {
	case "watch":
		ev.body = appendWatch(nil, "BOOKMARK", raw)
	default:
		ev.body = appendCloudEvent(nil, ev.id, source, kind, in.collection, at, raw)
	}
	return ev
}

var watchTypes = map[informer.NotificationType]string{
	informer.Added:    "ADDED",
	informer.Modified: "MODIFIED",
	informer.Deleted:  "DELETED",
	informer.Sync:     "SYNC",
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

func contentType(format string) string {
	if format == "watch" {
		return "application/json"
	}
	return "application/cloudevents+json"
}
