// Package egress is the enforcement point of a sandbox's network policy
// (driver.NetworkPolicy) where the provider has none of its own: an HTTP
// and SOCKS5 proxy that runs outside the sandbox, which the sandbox can
// reach but not reconfigure, and which brokers secrets
// (driver.BrokeredSecret) so that the sandbox never holds them.
//
// # Protocols
//
// One listener serves HTTP/1.1 proxy requests and SOCKS5, told apart by
// the first byte:
//
//   - CONNECT host:port opens a tunnel (HTTPS_PROXY). After the checks
//     below the proxy answers 200 and passes bytes through unchanged, so
//     any protocol over TLS works, unless the host has a brokered secret
//     (see below).
//   - An absolute-form request (GET http://host/path, HTTP_PROXY) is
//     relayed after the checks, without hop-by-hop and Proxy-* headers.
//     A client connection may carry many requests (keep-alive); each is
//     checked on its own. Redirects are relayed to the client, never
//     followed. A request in origin form (GET /path) or for https:// in
//     absolute form is a 400 saying what a proxy request looks like.
//   - SOCKS5 without authentication, CONNECT with a domain name, an IPv4
//     or an IPv6 address. BIND and UDP ASSOCIATE get reply 0x07 (command
//     not supported), an unknown address type 0x08, SOCKS4 a rejection.
//
// Every read of a request head, a SOCKS handshake or the TLS handshake
// of an intercepted tunnel has a deadline (Config.HeaderTimeout, 10 s by
// default), so a client that sends its headers byte by byte is cut off
// with 408; a head larger than 64 KiB is a 431.
//
// # Checks
//
// For every request, in this order:
//
//  1. A host name (compared case-insensitively, without a trailing dot,
//     in its IDNA ASCII form) is refused when a DenyDomains entry matches
//     it, and, in allow-list mode, when no AllowDomains entry does.
//     "*.example.com" matches a.example.com and a.b.example.com, never
//     example.com. A name whose last label is a number ("127.1",
//     "0x7f000001"), which resolvers read as an IPv4 address, is a 400,
//     as is any other string that is not a host name.
//     A name the policy does not allow is never resolved, so the sandbox
//     cannot use the proxy's resolver to send data out in DNS queries.
//  2. An IP address the client names itself is checked against the CIDR
//     lists only: in allow-list mode an AllowCIDRs entry must cover it;
//     in allow-all mode it passes unless a DenyCIDRs entry covers it.
//     AllowCIDRs entries let addresses through; they do not admit names.
//  3. The proxy resolves an allowed name itself (Config.Resolver) and
//     checks every address the name resolves to: one covered by a
//     DenyCIDRs entry refuses the request, and so does one that is
//     loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16,
//     the range of the cloud metadata service at 169.254.169.254;
//     fe80::/10), shared (100.64.0.0/10), unspecified, multicast,
//     broadcast or otherwise reserved, an address of the proxy's host
//     (its network interfaces' addresses, Config.HostAddrs: the proxy
//     runs on the host, so these reach every host service bound to
//     0.0.0.0 past the host's firewall), or the IPv4-mapped, NAT64
//     (64:ff9b::/96) or 6to4 form of one, unless an AllowCIDRs entry
//     names it. An entry names a special-purpose address only when it
//     covers it and lies inside the special range the address is in:
//     127.0.0.1/32 or 127.0.0.0/8 names loopback, 10.0.0.0/8 or
//     10.1.0.0/16 private space, 169.254.169.254/32 the metadata
//     service; 0.0.0.0/0, 0.0.0.0/1 or ::/0 names none of them, so an
//     allow-list of 0.0.0.0/0 is never more open than allow-all. An
//     address of the host that is in no other special range (a public
//     address of the host) is named only by an entry of that address
//     alone (/32 or /128). A sandbox may reach its host's services or
//     the metadata service only when the policy names their addresses.
//  4. The proxy connects to an address it checked, never to the name
//     again: a name that resolves to a public address for the check and
//     to 127.0.0.1 a moment later (DNS rebinding) reaches nothing it was
//     not allowed to.
//
// Every port from 1 to 65535 is allowed: the policy has no ports. A
// refusal is a 403 (SOCKS reply 0x02, "not allowed by ruleset") whose
// one-line body names the host and the reason, such as "egress:
// api.evil.com is not in the allow-list" or "egress: example.com
// resolves to 10.0.0.5, a private address the policy does not allow"; a
// name that cannot be resolved or an upstream that cannot be reached is
// a 502 naming it (SOCKS 0x04 or 0x05). Each is logged at Info with the
// host and the reason.
//
// SetPolicy replaces the policy at run time: every later request is
// checked against the new one, and an open tunnel to a destination the
// new policy refuses is closed at once; so is a plain HTTP exchange in
// progress (a long streamed response, or the tunnel a 101 Switching
// Protocols makes of it).
//
// A SOCKS5 success reply's bound address is always 0.0.0.0:0: the
// address the proxy connected from is the host's, which the sandbox is
// not told.
//
// # Brokered secrets
//
// A CONNECT (or SOCKS CONNECT) to a host that matches a secret's Hosts is
// intercepted, and only those: the proxy answers the client's TLS with a
// certificate for the host signed by the proxy's own CA (CACertPEM, an
// ECDSA P-256 CA made in New, valid for Config.CAValidity and
// name-constrained to the brokered hosts, so that it can sign for
// nothing else; the sandbox must trust it), verifies the upstream
// server as any client would (Config.UpstreamRoots, SNI the host) and
// relays HTTP/1.1 request by request. On each request it sets the
// secret's Header to Format applied to the value (replacing what the
// client sent) and replaces the Placeholder with the value in every
// other header value; it asks for an unencoded response and replaces
// the value, wherever the upstream echoes it back verbatim in a response
// header, trailer, reason phrase or body, with as many '*' (values
// shorter than 8 bytes are not searched for, nor is a body the upstream
// encodes anyway, nor an encoded form of the value). A request inside
// the tunnel whose Host is not the tunnel's host is refused with 421. Nothing else is touched: the URL, the body and a request to any
// other host carry the placeholder, never the value.
//
// Plain http:// to a host with a brokered secret is refused with 403:
// the value would cross the network in clear. So is a tunnel to such a
// host that does not carry TLS, and a request inside it that asks for a
// protocol upgrade (Upgrade: websocket, h2c, ...): after a 101 the
// stream is raw bytes, in which a value the upstream echoes could not be
// masked, so such a request is answered 403 and never sent.
//
// No message the proxy writes, to a client or to Config.Logger, can
// carry a value: each goes through the masking of every secret's value
// (of every host, whatever its length), and an upstream's malformed
// answer is reported as "malformed response", never quoted.
//
// # Limits
//
// At most Config.MaxConns client connections (256 by default) are served
// at once; one more gets 503 (SOCKS: general failure) at once. A tunnel
// or a keep-alive connection that carries no byte either way for
// Config.IdleTimeout (10 minutes by default) is closed. Close ends every
// connection and returns when every goroutine has.
//
// The proxy runs outside the sandbox's memory limit, so what a sandbox
// can make it hold is bounded: an upstream's response head (status line,
// headers and interim 1xx heads) over 1 MiB is a 502 "response header
// too large"; request heads being read hold at most 8 MiB across all
// connections at once (one that would pass it gets 503 and is closed);
// a connection over MaxConns is answered without its head being kept.
package egress
