package auth

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.csv")
	content := `# token,user,uid,groups
t-alice,alice,a-1,"devs,qa"
t-bob, bob, b-1

t-carol,carol,c-1,system:authenticated
`
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := LoadTokenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if tf.Len() != 3 {
		t.Fatalf("%d tokens, want 3", tf.Len())
	}
	for tok, want := range map[string]*User{
		"t-alice": {Name: "alice", UID: "a-1", Groups: []string{"devs", "qa", "system:authenticated"}},
		"t-bob":   {Name: "bob", UID: "b-1", Groups: []string{"system:authenticated"}},
		"t-carol": {Name: "carol", UID: "c-1", Groups: []string{"system:authenticated"}},
	} {
		u, err := tf.AuthenticateToken(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, u, cmpopts.IgnoreUnexported(User{})); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", want.Name, diff)
		}
	}
	if _, err := tf.AuthenticateToken(context.Background(), "t-nobody"); !isCode(err, 401) {
		t.Fatalf("unknown token: err = %v, want 401", err)
	}
}

func TestTokenFileBadInput(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"too few columns", "tok,alice\n", "line 1: want token,user,uid"},
		{"empty user", "tok,,uid\n", "line 1: empty user name"},
		{"duplicate token", "tok,a,1\ntok,b,2\n", "line 2: duplicate token"},
		{"token with space", "\"to k\",a,1\n", "line 1: bad token"},
		{"unterminated quote", "tok,a,1,\"g\n", "malformed CSV"},
		{"empty", "# nothing\n", "no tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokenFile(strings.NewReader(tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok,") || strings.Contains(err.Error(), "to k") {
				t.Fatalf("error quotes a token: %v", err)
			}
		})
	}
	if _, err := LoadTokenFile("/nonexistent/tokens.csv"); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("missing file: %v", err)
	}
}

// FuzzParseTokenFile: any input parses or fails cleanly, and every token
// parsed authenticates as a named user in system:authenticated.
func FuzzParseTokenFile(f *testing.F) {
	f.Add("t1,alice,a-1,\"devs,qa\"\nt2,bob,b-1\n")
	f.Add("# comment\n\"quoted,token\",x,y\n")
	f.Add("t,u,i,\"g\n")
	f.Fuzz(func(t *testing.T, content string) {
		tf, err := ParseTokenFile(strings.NewReader(content))
		if err != nil {
			return
		}
		for _, u := range tf.users {
			if u.Name == "" || !slices.Contains(u.Groups, "system:authenticated") {
				t.Fatalf("user %+v", u)
			}
		}
	})
}
