package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

// Subprotocol is the only WebSocket subprotocol the server speaks.
const Subprotocol = "kubegate.v1"

// Client frame types.
const (
	typeSubscribe   = "subscribe"
	typeUnsubscribe = "unsubscribe"
	typeWindow      = "window" // moves a window subscription
)

// maxIDLen bounds subscription ids, which are echoed in every frame.
const maxIDLen = 128

// clientFrame is a parsed client → server frame.
type clientFrame struct {
	Type              string `json:"type"`
	ID                string `json:"id"`
	Resource          string `json:"resource,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	LabelSelector     string `json:"labelSelector,omitempty"`
	FieldSelector     string `json:"fieldSelector,omitempty"`
	ResyncPeriod      string `json:"resyncPeriod,omitempty"`
	ResourceVersion   string `json:"resourceVersion,omitempty"`
	SendInitialEvents *bool  `json:"sendInitialEvents,omitempty"`
	As                string `json:"as,omitempty"`
	// A window subscription's (Limit set) and a window move's fields.
	Sort   string `json:"sort,omitempty"`
	Order  string `json:"order,omitempty"`
	Filter string `json:"filter,omitempty"`
	Limit  *int   `json:"limit,omitempty"`
	Offset *int   `json:"offset,omitempty"`
	Cursor string `json:"cursor,omitempty"`

	// resync is ResyncPeriod parsed.
	resync time.Duration
}

// asTable is the subscribe "as" value that asks for rows, named after
// the media type parameter kubectl asks the apiserver for Tables with.
const asTable = "Table"

// initialEvents returns SendInitialEvents with its default (true).
func (f *clientFrame) initialEvents() bool {
	return f.SendInitialEvents == nil || *f.SendInitialEvents
}

// requestError is a refused client frame. ID and Request are set when the
// frame could be attributed to a request.
type requestError struct {
	ID      string
	Request string
	Status  *metav1.Status
}

func (e *requestError) Error() string { return e.Status.Message }

func badRequest(f *clientFrame, format string, args ...any) *requestError {
	e := &requestError{Status: apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf(format, args...))}
	if f != nil {
		e.ID, e.Request = f.ID, f.Type
	}
	return e
}

// parseClientFrame decodes and validates one client text frame. Errors are
// *requestError; once the frame names a known type, the error carries it
// and the id, so the client can tell which request failed.
//
// Field names are matched exactly (encoding/json alone would accept
// "labelselector" for "labelSelector"), and unknown fields are refused, so
// a misspelt field never silently widens a subscription.
func parseClientFrame(data []byte) (*clientFrame, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badRequest(nil, "invalid frame: a frame must be a JSON object, not %s", te.Value)
		}
		return nil, badRequest(nil, "invalid frame: %s", jsonError(err))
	}
	if fields == nil {
		return nil, badRequest(nil, "invalid frame: a frame must be a JSON object, not null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest(nil, "invalid frame: a frame must hold exactly one JSON object")
	}
	var f clientFrame
	if err := decodeField(fields, "type", &f.Type); err != nil {
		return nil, badRequest(nil, "invalid frame: %v", err)
	}
	switch f.Type {
	case typeSubscribe, typeUnsubscribe, typeWindow:
	case "":
		return nil, badRequest(nil, `invalid frame: "type" is required ("subscribe", "unsubscribe" or "window")`)
	default:
		return nil, badRequest(nil, `invalid frame: unknown type %q; want "subscribe", "unsubscribe" or "window"`, truncate(f.Type, 64))
	}
	// From here on errors name the request, and the id if it is a string:
	// one too long to be a subscription's id is still echoed, once, so
	// that the client can tell which request failed.
	if err := decodeField(fields, "id", &f.ID); err != nil {
		return nil, badRequest(&clientFrame{Type: f.Type}, "invalid %s frame: %v", f.Type, err)
	}
	if err := validID(f.ID); err != nil {
		return nil, badRequest(&clientFrame{Type: f.Type, ID: f.ID}, "invalid %s frame: %v", f.Type, err)
	}
	known := map[string]any{"type": nil, "id": nil}
	switch f.Type {
	case typeSubscribe:
		known = map[string]any{"type": nil, "id": nil, "resource": &f.Resource, "namespace": &f.Namespace,
			"labelSelector": &f.LabelSelector, "fieldSelector": &f.FieldSelector, "resyncPeriod": &f.ResyncPeriod,
			"resourceVersion": &f.ResourceVersion, "sendInitialEvents": &f.SendInitialEvents, "as": &f.As,
			"sort": &f.Sort, "order": &f.Order, "filter": &f.Filter, "limit": &f.Limit, "offset": &f.Offset, "cursor": &f.Cursor}
	case typeWindow:
		known = map[string]any{"type": nil, "id": nil, "limit": &f.Limit, "offset": &f.Offset, "cursor": &f.Cursor}
	}
	for _, name := range sortedKeys(fields) {
		dst, ok := known[name]
		switch {
		case !ok && f.Type == typeUnsubscribe:
			return nil, badRequest(&f, `invalid unsubscribe frame: unknown field %q; only "type" and "id" are allowed`, truncate(name, 64))
		case !ok && f.Type == typeWindow:
			return nil, badRequest(&f, `invalid window frame: unknown field %q; only "type", "id", "offset", "cursor" and "limit" are allowed`, truncate(name, 64))
		case !ok:
			return nil, badRequest(&f, `invalid subscribe frame: unknown field %q`, truncate(name, 64))
		case dst == nil:
			continue
		}
		if err := decodeField(fields, name, dst); err != nil {
			return nil, badRequest(&f, "invalid %s frame: %v", f.Type, err)
		}
	}
	switch f.Type {
	case typeUnsubscribe:
		return &f, nil
	case typeWindow:
		if err := validRange(&f); err != nil {
			return nil, err
		}
		return &f, nil
	}
	if f.Resource == "" {
		return nil, badRequest(&f, `invalid subscribe frame: "resource" is required`)
	}
	if len(f.Resource) > 253 {
		return nil, badRequest(&f, `invalid subscribe frame: "resource" is longer than 253 bytes`)
	}
	if len(f.Namespace) > 63 {
		return nil, badRequest(&f, `invalid subscribe frame: "namespace" is longer than 63 bytes`)
	}
	if f.ResyncPeriod != "" {
		d, err := time.ParseDuration(f.ResyncPeriod)
		if err != nil || d < 0 {
			return nil, badRequest(&f, `invalid subscribe frame: "resyncPeriod" %q is not a non-negative duration such as "30s"`, truncate(f.ResyncPeriod, 64))
		}
		f.resync = d
	}
	switch f.As {
	case "", asTable:
		if f.Limit != nil {
			f.As = asTable // a window always carries rows
		}
	default:
		return nil, badRequest(&f, `invalid subscribe frame: "as" %q is not a form the gateway serves; want %q (rows) or none (objects)`,
			truncate(f.As, 64), asTable)
	}
	if rv := f.ResourceVersion; rv != "" {
		if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
			return nil, badRequest(&f, `invalid subscribe frame: "resourceVersion" %q is not a resourceVersion from an earlier event`, truncate(rv, 64))
		}
	}
	if err := validWindow(&f); err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeField decodes fields[name] into dst if present. JSON null leaves
// dst unset.
func decodeField(fields map[string]json.RawMessage, name string, dst any) error {
	raw, ok := fields[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %q must be %s, not %s", name, jsonKind(dst), te.Value)
		}
		return fmt.Errorf("field %q: %s", name, jsonError(err))
	}
	return nil
}

func jsonKind(dst any) string {
	switch dst.(type) {
	case **bool:
		return "a boolean"
	case **int:
		return "an integer"
	}
	return "a string"
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validID(id string) error {
	switch {
	case id == "":
		return errors.New(`"id" is required`)
	case len(id) > maxIDLen:
		return fmt.Errorf(`"id" is longer than %d bytes`, maxIDLen)
	case !utf8.ValidString(id):
		return errors.New(`"id" is not valid UTF-8`)
	}
	return nil
}

// jsonError words a decoding error for the client without Go type names.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type (got JSON %s)", te.Field, te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "empty frame"
	}
	return truncate(strings.TrimPrefix(err.Error(), "json: "), 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Server frames. Events are built by concatenation around Object.Raw (see
// appendEvent); the rare control frames use encoding/json.

// resourceRef describes a subscription's resolved resource in its ack.
type resourceRef struct {
	Group      string `json:"group"`
	Version    string `json:"version"`
	Resource   string `json:"resource"`
	Kind       string `json:"kind"`
	Namespaced bool   `json:"namespaced"`
}

type ackFrame struct {
	Type       string        `json:"type"`
	ID         string        `json:"id"`
	Request    string        `json:"request"`
	Resource   *resourceRef  `json:"resource,omitempty"`
	Namespaces []string      `json:"namespaces,omitempty"`
	Columns    []rows.Column `json:"columns,omitempty"`
	// A window's sort key and order as the server understood them.
	Sort  string `json:"sort,omitempty"`
	Order string `json:"order,omitempty"`
}

// columns returns the row columns of a subscription with rows (p not
// nil) for its ack: each Table column definition, and whether its cells
// may be relative (rows.Column).
func columns(p *rows.Printer) []rows.Column {
	if p == nil {
		return nil
	}
	return p.Columns()
}

type errorFrame struct {
	Type    string         `json:"type"`
	ID      string         `json:"id,omitempty"`
	Request string         `json:"request,omitempty"`
	Ended   bool           `json:"ended,omitempty"`
	Status  *metav1.Status `json:"status"`
}

type resetFrame struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// RESET reasons.
const (
	resetOverflow     = "Overflow"
	resetExpired      = "Expired"
	resetReauthorized = "Reauthorized"
)

func encodeAck(id, request string, info *informer.ResourceInfo, namespaces []string, cols []rows.Column) []byte {
	return mustJSON(newAck(id, request, info, namespaces, cols))
}

func newAck(id, request string, info *informer.ResourceInfo, namespaces []string, cols []rows.Column) ackFrame {
	f := ackFrame{Type: "ack", ID: id, Request: request, Namespaces: namespaces, Columns: cols}
	if info != nil {
		f.Resource = &resourceRef{Group: info.GVR.Group, Version: info.GVR.Version, Resource: info.GVR.Resource,
			Kind: info.GVK.Kind, Namespaced: info.Namespaced}
	}
	return f
}

func encodeError(id, request string, ended bool, st *metav1.Status) []byte {
	return mustJSON(errorFrame{Type: "error", ID: id, Request: request, Ended: ended, Status: st})
}

func encodeReset(id, reason string) []byte {
	return mustJSON(resetFrame{Type: "RESET", ID: id, Reason: reason})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ws: encode %T: %v", v, err)) // only fixed types of strings and Status
	}
	return b
}

// quoteID returns id as a JSON string, computed once per subscription.
func quoteID(id string) []byte { return mustJSON(id) }

var eventPrefix = [...]string{
	informer.Added:    `{"type":"ADDED","id":`,
	informer.Modified: `{"type":"MODIFIED","id":`,
	informer.Deleted:  `{"type":"DELETED","id":`,
	informer.Sync:     `{"type":"SYNC","id":`,
}

// Pieces of event frames, shared by appendEvent and eventLen.
const (
	rvField           = `,"rv":"`
	objectField       = `","object":`
	rowField          = `","row":`
	endOfSnapshotHead = `{"type":"END_OF_SNAPSHOT","id":`
	resetHead         = `{"type":"RESET","id":`
	resetOverflowTail = `,"reason":"` + resetOverflow + `"}`
)

// eventBody returns what the event frame of n carries: the object's
// cached JSON under "object", or, for a subscription with rows (p not
// nil), its row as p encoded it once under "row". Nothing for frames
// without an object.
func eventBody(n *informer.Notification, p *rows.Printer) (field string, body []byte) {
	switch n.Type {
	case informer.Added, informer.Modified, informer.Deleted, informer.Sync:
		if p != nil {
			return rowField, p.Encoded(n.Object)
		}
		return objectField, n.Object.Raw
	}
	return "", nil
}

// appendEvent appends the frame for one notification to buf, with the
// object as eventBody returned it: copied from cached bytes, never
// re-encoded.
func appendEvent(buf, qid []byte, n *informer.Notification, field string, body []byte) []byte {
	switch n.Type {
	case informer.Added, informer.Modified, informer.Deleted, informer.Sync:
		buf = append(buf, eventPrefix[n.Type]...)
		buf = append(buf, qid...)
		buf = append(buf, rvField...)
		buf = appendRV(buf, n)
		buf = append(buf, field...)
		buf = append(buf, body...)
		return append(buf, '}')
	case informer.EndOfSnapshot:
		buf = append(buf, endOfSnapshotHead...)
		buf = append(buf, qid...)
		buf = append(buf, rvField...)
		buf = strconv.AppendUint(buf, n.RV, 10)
		return append(buf, `"}`...)
	case informer.Reset:
		buf = append(buf, resetHead...)
		buf = append(buf, qid...)
		return append(buf, resetOverflowTail...)
	}
	return buf
}

// eventLen is the length of the frame appendEvent appends, known before
// it is built so that the writer can tell whether it fits in a batch.
func eventLen(qid []byte, n *informer.Notification, field string, body []byte) int {
	var digits [20]byte
	switch n.Type {
	case informer.Added, informer.Modified, informer.Deleted, informer.Sync:
		return len(eventPrefix[n.Type]) + len(qid) + len(rvField) + len(appendRV(digits[:0], n)) +
			len(field) + len(body) + 1
	case informer.EndOfSnapshot:
		return len(endOfSnapshotHead) + len(qid) + len(rvField) + len(strconv.AppendUint(digits[:0], n.RV, 10)) + 2
	case informer.Reset:
		return len(resetHead) + len(qid) + len(resetOverflowTail)
	}
	return 0
}

func appendRV(buf []byte, n *informer.Notification) []byte {
	if n.RV != 0 || n.Object == nil {
		return strconv.AppendUint(buf, n.RV, 10)
	}
	// A non-numeric resourceVersion (never from a real apiserver) is
	// passed through, escaped.
	q := mustJSON(n.Object.ResourceVersion)
	return append(buf, q[1:len(q)-1]...)
}

// batch packs frames into batch frames. Its buffer starts with the batch
// prefix so that a batch of several frames is written without another
// copy, and a lone frame is written as the bytes after the prefix.
type batch struct {
	buf   []byte
	count int
}

const (
	batchPrefix = `{"type":"batch","events":[`
	batchSuffix = `]}`
)

func (b *batch) reset() {
	b.buf = append(b.buf[:0], batchPrefix...)
	b.count = 0
}

// fits reports whether a frame of n bytes can join the batch without
// making its message longer than max. Any frame fits an empty batch: a
// frame alone is sent as it is, whatever its size.
func (b *batch) fits(n, max int) bool {
	return b.count == 0 || len(b.buf)+len(",")+n+len(batchSuffix) <= max
}

// begin prepares to append one frame to b.buf.
func (b *batch) begin() {
	if b.count > 0 {
		b.buf = append(b.buf, ',')
	}
	b.count++
}

// add appends a complete frame.
func (b *batch) add(frame []byte) {
	b.begin()
	b.buf = append(b.buf, frame...)
}

// message returns the message to send: the lone frame, or the batch.
func (b *batch) message() []byte {
	if b.count == 1 {
		return b.buf[len(batchPrefix):]
	}
	b.buf = append(b.buf, batchSuffix...)
	return b.buf
}
