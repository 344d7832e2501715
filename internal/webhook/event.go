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
	id   string
	kind string // added, modified, deleted or sync
	key  string // namespace/name, for logs
	body []byte
}

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
	p := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		p = "/api/" + gvr.Version
	}
	if namespaced && o.Namespace != "" {
		p += "/namespaces/" + o.Namespace
	}
	return p + "/" + gvr.Resource + "/" + o.Name
}

// CloudEvents type prefix; the kind follows: io.kubegate.resource.added.
const eventTypePrefix = "io.kubegate.resource."

// newEvent renders n. The object's JSON (Raw, encoded once when the
// informer received it) is spliced into the envelope as is.
func newEvent(info *informer.ResourceInfo, n informer.Notification, format, source string, at time.Time) event {
	kind := eventKinds[n.Type]
	ev := event{id: eventID(info.GVR, n, kind, at), kind: kind, key: n.Object.Key()}
	raw := n.Object.Raw
	var b []byte
	switch format {
	case "watch":
		b = make([]byte, 0, len(raw)+32)
		b = append(b, `{"type":`...)
		b = appendJSONString(b, watchTypes[n.Type])
		b = append(b, `,"object":`...)
		b = append(b, raw...)
		b = append(b, '}')
	default:
		b = make([]byte, 0, len(raw)+256)
		b = append(b, `{"specversion":"1.0","id":`...)
		b = appendJSONString(b, ev.id)
		b = append(b, `,"source":`...)
		b = appendJSONString(b, source)
		b = append(b, `,"type":`...)
		b = appendJSONString(b, eventTypePrefix+kind)
		b = append(b, `,"subject":`...)
		b = appendJSONString(b, objectPath(info.GVR, info.Namespaced, n.Object))
		b = append(b, `,"time":`...)
		b = appendJSONString(b, at.UTC().Format(time.RFC3339Nano))
		b = append(b, `,"datacontenttype":"application/json","data":`...)
		b = append(b, raw...)
		b = append(b, '}')
	}
	ev.body = b
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
