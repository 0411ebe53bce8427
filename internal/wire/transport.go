package wire

import "net/http"

// Transport returns the RoundTripper an HTTP adapter runs on when its
// WithTransport option was given (nil when it was not), so the option
// means the same on every adapter: nil is a clone of
// http.DefaultTransport with up to 32 idle connections per host; an
// *http.Transport (given or the default) is cloned, its transparent
// compression turned off (Go would ask for gzip and decompress silently,
// hiding a download's real size) and its dialer wrapped by CountWrites, so
// counting is true and Attempt.NotSent can tell a request that never left;
// any other RoundTripper is used as it is, and then only a failed dial
// counts as not sent. The adapter sets no client-wide timeout: contexts
// bound every call.
func Transport(given http.RoundTripper) (rt http.RoundTripper, counting bool) {
	var ht *http.Transport
	switch t := given.(type) {
	case nil:
		ht = http.DefaultTransport.(*http.Transport).Clone()
		ht.MaxIdleConnsPerHost = 32
	case *http.Transport:
		ht = t.Clone()
	default:
		return given, false
	}
	ht.DisableCompression = true
	CountWrites(ht)
	return ht, true
}
