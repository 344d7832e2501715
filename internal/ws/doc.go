// Package ws serves the WebSocket API at /ws (subprotocol kubegate.v1,
// specified in docs/protocol.md).
//
// Data flow: a client's subscribe frame becomes one informer.Listener on
// the shared cache (internal/informer), authorized through auth.Authorizer
// as the verb watch. The informer's processor appends changes to the
// listener's bounded ring and wakes the socket; the socket's writer pops
// every listener and sends the objects' cached JSON bytes (Object.Raw),
// or for a subscription with rows ("as": "Table") their rows, encoded once
// per object version (internal/rows), framed by concatenation, so no
// object or row is ever re-encoded per client.
// When a client falls behind, its listeners overflow into RESET plus a
// fresh snapshot, and a client that keeps falling behind or stops reading
// is closed; other clients never wait for it.
package ws
