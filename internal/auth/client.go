package auth

import "net"

// ClientKey names the client that per-client shares and limits apply to
// (sockets, live views): the user, or the remote IP for anonymous
// callers, who all share one name. remoteAddr is the client's address,
// host:port or host.
func ClientKey(u *User, remoteAddr string) string {
	if u != nil && u.Name != "" && u.Name != AnonymousUser.Name {
		return "user:" + u.Name
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return "ip:" + host
}
