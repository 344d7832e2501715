package bench

import (
	"bytes"
	"errors"
	"strconv"
)

// The receivers decode only what they need: the event type, the
// subscription id and the resourceVersion. Decoding whole 7 KB Pods would
// make the benchmark's own process the bottleneck on two cores, so frames
// are scanned, not unmarshalled.

var errBadJSON = errors.New("malformed JSON")

// frameFunc receives one protocol frame of the gateway: its type, id and
// rv (empty when absent). The slices alias the message.
type frameFunc func(typ, id, rv []byte)

// scanFrames calls fn for every frame in a gateway message: the message
// itself, or each element of a batch's events.
func scanFrames(msg []byte, fn frameFunc) error {
	i := skipSpace(msg, 0)
	_, err := scanFrame(msg, i, fn, true)
	return err
}

// scanFrame reads the object at b[i] and returns the index after it.
func scanFrame(b []byte, i int, fn frameFunc, top bool) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, errBadJSON
	}
	var typ, id, rv []byte
	batch := false
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		key, j, err := readString(b, i)
		if err != nil {
			return 0, err
		}
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return 0, errBadJSON
		}
		j = skipSpace(b, j+1)
		switch {
		case string(key) == "type" || string(key) == "id" || string(key) == "rv":
			v, k, err := readString(b, j)
			if err != nil {
				return 0, err
			}
			switch string(key) {
			case "type":
				typ = v
				batch = string(v) == "batch"
			case "id":
				id = v
			default:
				rv = v
			}
			j = k
		case top && string(key) == "events":
			if j >= len(b) || b[j] != '[' {
				return 0, errBadJSON
			}
			j = skipSpace(b, j+1)
			for j < len(b) && b[j] != ']' {
				if j, err = scanFrame(b, j, fn, false); err != nil {
					return 0, err
				}
				j = skipSpace(b, j)
				if j < len(b) && b[j] == ',' {
					j = skipSpace(b, j+1)
				}
			}
			j++
		default:
			if j, err = skipValue(b, j); err != nil {
				return 0, err
			}
		}
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return 0, errBadJSON
	}
	if !batch {
		fn(typ, id, rv)
	}
	return i + 1, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// readString returns the raw (still escaped) contents of the string at b[i]
// and the index after its closing quote.
func readString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, errBadJSON
	}
	start := i + 1
	j := start
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return nil, 0, errBadJSON
		}
		j += k
		// An odd number of backslashes before the quote escapes it.
		n := 0
		for p := j - 1; p >= start && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return b[start:j], j + 1, nil
		}
		j++
	}
}

// skipValue returns the index after the JSON value at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errBadJSON
	}
	switch b[i] {
	case '"':
		_, j, err := readString(b, i)
		return j, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, k, err := readString(b, j)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errBadJSON
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' {
			j++
		}
		return j, nil
	}
}

var (
	typeKey = []byte(`"type":"`)
	rvKey   = []byte(`"resourceVersion":"`)
)

// scanWatchEvent reads the type and the object's resourceVersion from one
// line of kube-apiserver's JSON watch stream. The apiserver writes type
// first and metadata first in the object, and resourceVersion is the first
// key of that name, so the scan looks at the head of the line only.
func scanWatchEvent(line []byte) (typ []byte, rv uint64, ok bool) {
	i := bytes.Index(line, typeKey)
	if i < 0 {
		return nil, 0, false
	}
	rest := line[i+len(typeKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, 0, false
	}
	typ = rest[:j]
	k := bytes.Index(rest, rvKey)
	if k < 0 {
		return typ, 0, true
	}
	rest = rest[k+len(rvKey):]
	e := bytes.IndexByte(rest, '"')
	if e < 0 {
		return typ, 0, false
	}
	rv, err := strconv.ParseUint(string(rest[:e]), 10, 64)
	return typ, rv, err == nil
}
