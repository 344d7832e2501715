package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The receivers decode only what they need: the event type, the
// subscription id and the resourceVersion. Decoding whole 7 KB Pods would
// make the benchmark's own process the bottleneck on two cores, so
// messages are read as JSON tokens (jsontext, as the gateway's informer
// reads the apiserver's), and everything else is skipped as raw values.

var errBadJSON = errors.New("malformed JSON")

// scanner reads one message with a jsontext.Decoder. A bytes.Buffer lets
// the decoder parse the message in place, so the values it returns alias
// the message. Scanners are pooled: a decoder is too large to build per
// message.
type scanner struct {
	in  bytes.Buffer
	dec jsontext.Decoder
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// newScanner returns a pooled scanner reading msg. The input is the
// gateway's or the apiserver's own encoding, so the checks that cost a
// pass of their own (duplicate names, UTF-8) are off; syntax is checked.
func newScanner(msg []byte) *scanner {
	s := scanners.Get().(*scanner)
	s.in = *bytes.NewBuffer(msg)
	s.dec.Reset(&s.in, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return s
}

func (s *scanner) release() {
	s.in = bytes.Buffer{}
	s.dec.Reset(&s.in) // drop the reference to the message
	scanners.Put(s)
}

// open reads the '{' or '[' that starts a value.
func (s *scanner) open(kind jsontext.Kind) error {
	if k := s.dec.PeekKind(); k != kind {
		if _, err := s.dec.ReadToken(); err != nil {
			return err
		}
		return fmt.Errorf("%w: got %v, want %v", errBadJSON, k, kind)
	}
	_, err := s.dec.ReadToken()
	return err
}

// str reads a string value and returns its raw (still escaped) contents.
func (s *scanner) str() ([]byte, error) {
	if s.dec.PeekKind() != '"' {
		return nil, errBadJSON
	}
	v, err := s.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return v[1 : len(v)-1], nil
}

// skip reads past a value. ReadValue is faster than SkipValue, and on an
// in-place buffer it copies nothing.
func (s *scanner) skip() error {
	_, err := s.dec.ReadValue()
	return err
}

// frameFunc receives one protocol frame of the gateway: its type, id and
// rv (empty when absent). The slices alias the message.
type frameFunc func(typ, id, rv []byte)

// scanFrames calls fn for every frame in a gateway message: the message
// itself, or each element of a batch's events.
func scanFrames(msg []byte, fn frameFunc) error {
	s := newScanner(msg)
	defer s.release()
	if err := s.frame(fn, true); err != nil {
		return err
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return fmt.Errorf("%w: data after the message", errBadJSON)
	}
	return nil
}

// frame reads one frame object; top says whether it may be a batch.
func (s *scanner) frame(fn frameFunc, top bool) error {
	if err := s.open('{'); err != nil {
		return err
	}
	var typ, id, rv []byte
	for s.dec.PeekKind() != '}' {
		name, err := s.dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(name) {
		case `"type"`:
			typ, err = s.str()
		case `"id"`:
			id, err = s.str()
		case `"rv"`:
			rv, err = s.str()
		case `"events"`:
			if top {
				err = s.events(fn)
			} else {
				err = s.skip()
			}
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return err
	}
	if string(typ) != "batch" {
		fn(typ, id, rv)
	}
	return nil
}

// events reads a batch's array of frames.
func (s *scanner) events(fn frameFunc) error {
	if err := s.open('['); err != nil {
		return err
	}
	for s.dec.PeekKind() != ']' {
		if err := s.frame(fn, false); err != nil {
			return err
		}
	}
	_, err := s.dec.ReadToken()
	return err
}

// scanWatchEvent reads the type and the object's metadata.resourceVersion
// from one line of kube-apiserver's JSON watch stream (rv is 0 for an
// object without one, such as an ERROR's Status). It stops as soon as it
// has both: the apiserver writes type first and metadata first in the
// object, so line may be only the head of a long line.
func scanWatchEvent(line []byte) (typ []byte, rv uint64, ok bool) {
	s := newScanner(line)
	defer s.release()
	typ, rv, err := s.watchEvent()
	return typ, rv, err == nil && typ != nil
}

func (s *scanner) watchEvent() (typ []byte, rv uint64, err error) {
	if err := s.open('{'); err != nil {
		return nil, 0, err
	}
	var raw []byte // the resourceVersion, once found
	for typ == nil || raw == nil {
		if s.dec.PeekKind() == '}' {
			break
		}
		name, err := s.dec.ReadValue()
		if err != nil {
			return nil, 0, err
		}
		switch string(name) {
		case `"type"`:
			typ, err = s.str()
		case `"object"`:
			depth := s.dec.StackDepth()
			raw, err = s.path(`"metadata"`, `"resourceVersion"`)
			if err == nil && raw != nil && typ == nil {
				err = s.leave(depth) // the type comes after the object
			}
		default:
			err = s.skip()
		}
		if err != nil {
			return nil, 0, err
		}
	}
	if raw == nil {
		return typ, 0, nil
	}
	rv, err = strconv.ParseUint(string(raw), 10, 64)
	return typ, rv, err
}

// objectRV reads metadata.resourceVersion from an object's JSON.
func objectRV(raw []byte) (uint64, error) {
	s := newScanner(raw)
	defer s.release()
	v, err := s.path(`"metadata"`, `"resourceVersion"`)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, errors.New("no resourceVersion in response")
	}
	return strconv.ParseUint(string(v), 10, 64)
}

// path reads the object at the decoder's position down the member names
// given (raw, quoted) and returns the raw contents of the string there.
// Once it has found it, it leaves the decoder inside the object, so the
// caller must stop reading. It returns nil when the path does not lead to
// a string, having read past the whole value.
func (s *scanner) path(names ...string) ([]byte, error) {
	if s.dec.PeekKind() != '{' {
		return nil, s.skip()
	}
	if err := s.open('{'); err != nil {
		return nil, err
	}
	for s.dec.PeekKind() != '}' {
		name, err := s.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if string(name) != names[0] {
			if err := s.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if len(names) > 1 {
			v, err := s.path(names[1:]...)
			if v != nil || err != nil {
				return v, err
			}
			continue
		}
		if s.dec.PeekKind() != '"' {
			if err := s.skip(); err != nil {
				return nil, err
			}
			continue
		}
		return s.str()
	}
	_, err := s.dec.ReadToken()
	return nil, err
}

// leave reads on until the decoder is back at depth (see
// jsontext.Decoder.StackDepth), past the ends of the objects and arrays
// it is inside.
func (s *scanner) leave(depth int) error {
	for s.dec.StackDepth() > depth {
		var err error
		if k := s.dec.PeekKind(); k == '}' || k == ']' {
			_, err = s.dec.ReadToken()
		} else {
			err = s.skip() // a member name or a value
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scanTableWatchEvent reads the type and the resourceVersion of a watch
// event whose object is a one-row meta.k8s.io Table (Accept as=Table, as
// kubectl get -w asks): the version of the row's object, its metadata
// (includeObject=Metadata, the default). The Table's own
// metadata.resourceVersion is not read: kube-apiserver sets it to the
// object's, the gateway leaves it out.
func scanTableWatchEvent(line []byte) (typ []byte, rv uint64, ok bool) {
	s := newScanner(line)
	defer s.release()
	typ, rv, err := s.tableWatchEvent()
	return typ, rv, err == nil && typ != nil
}

func (s *scanner) tableWatchEvent() (typ []byte, rv uint64, err error) {
	if err := s.open('{'); err != nil {
		return nil, 0, err
	}
	var raw []byte
	for s.dec.PeekKind() != '}' {
		name, err := s.dec.ReadValue()
		if err != nil {
			return nil, 0, err
		}
		switch string(name) {
		case `"type"`:
			typ, err = s.str()
		case `"object"`:
			raw, err = s.firstRowVersion()
		default:
			err = s.skip()
		}
		if err != nil {
			return nil, 0, err
		}
	}
	if raw == nil {
		return typ, 0, nil // an ERROR's Status, or a BOOKMARK
	}
	rv, err = strconv.ParseUint(string(raw), 10, 64)
	return typ, rv, err
}

// firstRowVersion reads a Table and returns the resourceVersion of its
// first row's object (nil if it has none), having read past the Table.
func (s *scanner) firstRowVersion() ([]byte, error) {
	if s.dec.PeekKind() != '{' {
		return nil, s.skip()
	}
	if err := s.open('{'); err != nil {
		return nil, err
	}
	var rv []byte
	for s.dec.PeekKind() != '}' {
		name, err := s.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if string(name) != `"rows"` || s.dec.PeekKind() != '[' || rv != nil {
			if err := s.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.open('['); err != nil {
			return nil, err
		}
		for s.dec.PeekKind() != ']' {
			if rv != nil || s.dec.PeekKind() != '{' {
				if err := s.skip(); err != nil {
					return nil, err
				}
				continue
			}
			depth := s.dec.StackDepth()
			v, err := s.path(`"object"`, `"metadata"`, `"resourceVersion"`)
			if err != nil {
				return nil, err
			}
			if v != nil {
				rv = append([]byte(nil), v...)
				if err := s.leave(depth); err != nil {
					return nil, err
				}
			}
		}
		if _, err := s.dec.ReadToken(); err != nil {
			return nil, err
		}
	}
	_, err := s.dec.ReadToken()
	return rv, err
}
