package auth

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// TokenFile authenticates static tokens listed in a CSV file, in the
// format of kube-apiserver's --token-auth-file:
//
//	token,user,uid,"group1,group2"
//
// The group column is optional; lines starting with # are comments.
// Every user also gets the group system:authenticated, as the apiserver
// adds it, so RBAC bindings to that group apply. The file is read once;
// restart the gateway to change it.
type TokenFile struct {
	users map[[sha256.Size]byte]*User // by the token's SHA-256
}

// LoadTokenFile reads a token file.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	tf, err := ParseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tf, nil
}

// ParseTokenFile parses token-file content. Errors name the line but never
// quote a token.
func ParseTokenFile(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	tf := &TokenFile{users: map[[sha256.Size]byte]*User{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: malformed CSV", pe.Line)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: want token,user,uid[,\"group1,group2\"], got %d columns", line, len(rec))
		}
		tok, name, uid := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		if err := checkToken(tok); err != nil {
			return nil, fmt.Errorf("line %d: bad token: %v", line, err)
		}
		if name == "" {
			return nil, fmt.Errorf("line %d: empty user name", line)
		}
		u := &User{Name: name, UID: uid}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" && !slices.Contains(u.Groups, g) {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		if !slices.Contains(u.Groups, "system:authenticated") {
			u.Groups = append(u.Groups, "system:authenticated")
		}
		key := sha256.Sum256([]byte(tok))
		if _, dup := tf.users[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate token", line)
		}
		tf.users[key] = u
	}
	if len(tf.users) == 0 {
		return nil, errors.New("no tokens")
	}
	return tf, nil
}

// Len is the number of tokens.
func (f *TokenFile) Len() int { return len(f.users) }

// AuthenticateToken implements TokenAuthenticator.
func (f *TokenFile) AuthenticateToken(_ context.Context, token string) (*User, error) {
	if u, ok := f.users[sha256.Sum256([]byte(token))]; ok {
		return u, nil
	}
	return nil, unauthorized("invalid bearer token")
}

// CachedToken implements CachedTokens: every lookup in the file is free.
func (f *TokenFile) CachedToken(token string) (*User, bool) {
	u, ok := f.users[sha256.Sum256([]byte(token))]
	return u, ok
}
