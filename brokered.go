package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"golang.org/x/net/publicsuffix"
)

// BrokeredSecret is a secret the sandbox may use but never holds: an
// enforcement point outside the sandbox (the local provider's egress
// proxy, or the provider's own edge) adds it to the sandbox's requests to
// Hosts, and the sandbox sees only a placeholder. Code a model wrote can
// so call an API with a key it cannot read, copy or send anywhere else.
//
// The placeholder is generated per secret and per sandbox, recognisable
// ("SBX_BROKERED_<name>_<24 hex digits>") and not derived from the value;
// it is set in the sandbox's environment under Env when Env is given, and
// Info.BrokeredSecrets reports it. The value is redacted, as a
// CreateOptions.SecretEnv value is, from every output and error that goes
// through the creating handle.
//
// A provider that cannot broker secrets (Capabilities.NetworkPolicy.
// BrokeredSecrets false) refuses them at Create with FailedPrecondition
// before any request. A brokered secret needs a network: with
// CreateOptions.Network nil the sandbox gets an allow-all policy (enforced
// by the same point that brokers the secret), and with NoNetwork, or a
// policy that does not let one of Hosts through, Create fails with
// InvalidArgument naming the host: a secret for a host the sandbox cannot
// reach is a mistake.
type BrokeredSecret struct {
	// Value is the real secret. It never enters the sandbox, and errors
	// never show it (they name the secret by Env or Header).
	Value string
	// Hosts are the domains whose requests get the value: exact names
	// ("api.example.com") or wildcards matching every subdomain
	// ("*.example.com"), written and normalised as NetworkPolicy entries.
	// Addresses and CIDRs are refused: a header is brokered by name. So
	// are names that no one owner controls, whose sites anyone may run: a
	// single label ("localhost", "com"), a public suffix ("co.uk",
	// "github.io", from the public suffix list's ICANN and private
	// sections) and a wildcard directly over one ("*.com", "*.github.io").
	// A network allow-list may name those; a secret may not.
	Hosts []string
	// Header is the request header that carries the value. Empty means
	// "Authorization". It must be an HTTP token and not a header the
	// transport owns (Host, Content-Length, a hop-by-hop header such as
	// Connection, or any Proxy-* header, which a proxy consumes); it is
	// canonicalised
	// ("x-api-key" becomes "X-Api-Key").
	Header string
	// Format builds the header's value from Value, with exactly one "%s"
	// and no other verb ("%%" is a literal percent sign): "Bearer %s"
	// sends "Bearer <value>". Empty means "%s", the value alone.
	Format string
	// Env, when set, names the environment variable that holds the
	// placeholder in the sandbox. It must be a valid env name not set by
	// CreateOptions.Env, CreateOptions.SecretEnv or another brokered
	// secret.
	Env string
}

// BrokeredSecretInfo describes a brokered secret as Info reports it:
// where it goes and how, never its value.
type BrokeredSecretInfo struct {
	// Hosts are the normalised domains that get the secret.
	Hosts []string
	// Header is the canonical header that carries it.
	Header string
	// Env is the sandbox's env variable holding the placeholder, if any.
	Env string
	// Placeholder is what stands for the secret inside the sandbox (not
	// secret itself); empty when the provider does not report it to a
	// handle that did not create the sandbox.
	Placeholder string
}

// defaultBrokeredHeader is the header a BrokeredSecret without Header uses.
const defaultBrokeredHeader = "Authorization"

// transportHeaders are the headers a brokered secret may not set: the
// hop-by-hop headers of RFC 9110 §7.6.1 (and the proxy's own), and those
// that frame or route the request.
var transportHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// checkFormat checks that f holds exactly one %s and no other verb. Its
// errors never quote f: a careless caller pastes the key itself there.
func checkFormat(f string) error {
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i+1 == len(f) {
			return fmt.Errorf("ends with a lone %%")
		}
		switch f[i+1] {
		case '%':
		case 's':
			n++
		default:
			return fmt.Errorf("holds the verb %%%c at byte %d: only one %%s (and %%%% for a percent sign) may appear", f[i+1], i)
		}
		i++
	}
	if n != 1 {
		return fmt.Errorf("holds %d %%s verbs, not exactly one", n)
	}
	return nil
}

// hasHeaderUnsafe reports whether s holds a byte that cannot appear in an
// HTTP header value (control characters but tab; CR and LF would split
// the header).
func hasHeaderUnsafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}

// secretName is how errors name the i-th brokered secret: never by value.
func secretName(i int, s BrokeredSecret, hint func(string) string) string {
	if s.Env != "" {
		return fmt.Sprintf("brokered secret %d (Env %s)", i, hint(s.Env))
	}
	return fmt.Sprintf("brokered secret %d", i)
}

// letThrough reports whether the policy p lets every destination the
// domain entry h names through: with allow-all when no deny entry covers
// it, with an allow-list when an allow entry covers it and no deny entry
// does.
func letThrough(p *driver.NetworkPolicy, h netEntry) bool {
	if p == nil {
		return true
	}
	covered := func(list []string) bool {
		return slices.ContainsFunc(list, func(d string) bool {
			e, err := parseNetEntry(d)
			return err == nil && e.covers(h)
		})
	}
	switch p.Mode {
	case NetworkAllowAll:
		return !covered(p.DenyDomains)
	case NetworkAllowList:
		return covered(p.AllowDomains) && !covered(p.DenyDomains)
	}
	return false
}

// overlaps reports whether two domain entries match a common name.
func overlaps(a, b netEntry) bool { return a.covers(b) || b.covers(a) }

// checkBrokeredDomain refuses a domain entry whose matches are not one
// owner's: a single label ("localhost", "com"), a public suffix
// ("co.uk", "github.io") or a wildcard directly over one ("*.com",
// "*.github.io"), where any site under the suffix, anyone's, would get
// the secret. The public suffix list (golang.org/x/net/publicsuffix)
// includes its private section, so hosting domains whose subdomains
// belong to different customers count as suffixes too. The error
// completes "host X ...".
func checkBrokeredDomain(d string) error {
	base, wild := strings.CutPrefix(d, "*.")
	if !strings.Contains(base, ".") {
		if wild {
			return fmt.Errorf("is a wildcard over a single label: every host under it, anyone's, would get the secret; name the hosts of the API (api.example.com or *.example.com)")
		}
		return fmt.Errorf("is a single label: a secret is brokered to a fully qualified domain (api.example.com), not a name a resolver search list or a top-level domain completes")
	}
	if suffix, _ := publicsuffix.PublicSuffix(base); suffix == base {
		if wild {
			return fmt.Errorf("is a wildcard over the public suffix %s, under which anyone can own a site that would get the secret; name the hosts of the API (api.example.com or *.example.com)", base)
		}
		return fmt.Errorf("is a public suffix (under which anyone can own a site), not the host of an API")
	}
	return nil
}

// hint is how a brokered secret's error quotes a host, Header or Env the
// caller gave: in full when it looks like a name (quoted unless made of
// letters, digits and .-_* only), else (a value pasted
// into the wrong field looks like a key: a long run of letters mixed
// with digits, or a long string) only its first four characters and its
// length, so that an error never carries a key.
func hint(s string) string {
	if !looksLikeKey(s) && s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_*") == "" {
		return s // a plain name reads best unquoted
	}
	return quotedHint(s)
}

// quotedHint is hint, always quoted: for a value being refused.
func quotedHint(s string) string {
	if !looksLikeKey(s) {
		return strconv.Quote(printable(s))
	}
	r := []rune(s)
	return fmt.Sprintf("%q… (%d characters, the rest withheld: it looks like a key)", printable(string(r[:min(4, len(r))])), len(s))
}

// looksLikeKey reports whether s looks like a credential rather than a
// name: longer than 64 bytes, or with a run of 16 or more letters and
// digits (between dots, hyphens or underscores) that mixes both, as
// keys and tokens do and host names rarely do.
func looksLikeKey(s string) bool {
	if len(s) > 64 {
		return true
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '_' || r == '*' }) {
		if len(part) < 16 {
			continue
		}
		letters, digits := false, false
		for _, c := range part {
			switch {
			case c >= '0' && c <= '9':
				digits = true
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				letters = true
			default:
				// Anything else (+, /, =) is base64 or worse: a key.
				return true
			}
		}
		if letters && digits {
			return true
		}
	}
	return false
}

// placeholderFor builds the placeholder of a secret: a recognisable
// prefix, a name from Env or Header, and 96 random bits.
func placeholderFor(s BrokeredSecret, header string) (string, error) {
	name := s.Env
	if name == "" {
		name = header
	}
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sandbox: placeholder for a brokered secret: %w", err)
	}
	return "SBX_BROKERED_" + name + "_" + hex.EncodeToString(b[:]), nil
}

// brokeredSecrets validates opts.BrokeredSecrets against the policy np
// (already normalised) and the env the sandbox gets, and returns them as
// the driver takes them, with placeholders; env gains the placeholders
// under each secret's Env. Errors never hold a value: they name a
// secret by index and Env, never quote a Format, quote a host, Header or
// Env only when it does not look like a key (see hint), and every value
// of the request (brokered or SecretEnv) is replaced by [REDACTED] in
// them, should a value have been pasted into another field.
func brokeredSecrets(op, provider string, opts CreateOptions, np *driver.NetworkPolicy, env map[string]string) ([]driver.BrokeredSecret, error) {
	values := withQuoted(createSecrets(opts))
	scrub := func(s string) string { return string(redact([]byte(s), values)) }
	out, err := checkBrokeredSecrets(op, provider, opts, np, env,
		func(s string) string { return scrub(hint(s)) }, func(s string) string { return scrub(quotedHint(s)) })
	if err != nil {
		// Every value is scrubbed from what the caller gave (above); the
		// whole text too, for values long enough not to match the error's
		// own words (a value of a few letters would turn the text into
		// a row of [REDACTED]).
		var long [][]byte
		for _, v := range createSecrets(opts) {
			if len(v) >= minScrubbedLen {
				long = append(long, v)
			}
		}
		return nil, redactErr(err, long)
	}
	return out, nil
}

// minScrubbedLen is the shortest value scrubbed from the whole text of a
// brokered secret's validation error (every value is scrubbed from the
// parts of it the caller gave).
const minScrubbedLen = 6

// checkBrokeredSecrets is brokeredSecrets before the redaction of its
// errors.
// hint and quotedHint are those of this package with every value of the
// request scrubbed.
func checkBrokeredSecrets(op, provider string, opts CreateOptions, np *driver.NetworkPolicy, env map[string]string, hint, quotedHint func(string) string) ([]driver.BrokeredSecret, error) {
	type owner struct {
		host   netEntry
		header string
		secret int
	}
	var (
		out    []driver.BrokeredSecret
		taken  []owner
		envSet = map[string]int{}
	)
	for i, s := range opts.BrokeredSecrets {
		what := secretName(i, s, hint)
		if s.Value == "" {
			return nil, invalid(op, provider, "", what, "empty Value")
		}
		if hasHeaderUnsafe(s.Value) {
			// The value is never shown, not even in part.
			return nil, invalid(op, provider, "", what, "Value holds a control character (CR, LF, NUL...), which an HTTP header cannot carry")
		}
		if len(s.Hosts) == 0 {
			return nil, invalid(op, provider, "", what, "no Hosts: a brokered secret names the domains that get it")
		}
		header := s.Header
		if header == "" {
			header = defaultBrokeredHeader
		}
		if !isToken(header) {
			return nil, invalid(op, provider, "", what, "Header %s is not an HTTP header name (a token of letters, digits and !#$%%&'*+-.^_`|~)", quotedHint(header))
		}
		header = textproto.CanonicalMIMEHeaderKey(header)
		if slices.Contains(transportHeaders, header) || strings.HasPrefix(header, "Proxy-") {
			return nil, invalid(op, provider, "", what, "Header %s is owned by the transport (Host, Content-Length, hop-by-hop and Proxy-* headers cannot be brokered)", header)
		}
		format := s.Format
		if format == "" {
			format = "%s"
		}
		if err := checkFormat(format); err != nil {
			return nil, invalid(op, provider, "", what, "Format %v", err)
		}
		if hasHeaderUnsafe(format) {
			return nil, invalid(op, provider, "", what, "Format holds a control character")
		}
		if s.Env != "" {
			if !envKeyRE.MatchString(s.Env) {
				return nil, invalid(op, provider, "", what, "Env %s must match %s", quotedHint(s.Env), envKeyRE)
			}
			if _, ok := opts.Env[s.Env]; ok {
				return nil, invalid(op, provider, "", what, "Env %s is also set in CreateOptions.Env", hint(s.Env))
			}
			if _, ok := opts.SecretEnv[s.Env]; ok {
				return nil, invalid(op, provider, "", what, "Env %s is also set in CreateOptions.SecretEnv", hint(s.Env))
			}
			if j, ok := envSet[s.Env]; ok {
				return nil, invalid(op, provider, "", what, "Env %s is also the Env of brokered secret %d", hint(s.Env), j)
			}
			envSet[s.Env] = i
		}
		var hosts []netEntry
		for _, h := range s.Hosts {
			e, err := parseNetEntry(h)
			if err != nil {
				// The entry's error quotes it: quote the hint instead.
				msg := err.Error()
				for _, q := range []string{strconv.Quote(h), strconv.Quote(printable(h))} {
					msg = strings.ReplaceAll(msg, q, hint(h))
				}
				return nil, invalid(op, provider, "", what, "host: %s", msg)
			}
			if !e.isDomain() {
				return nil, invalid(op, provider, "", what, "host %s is an address: a secret is brokered to domain names only", hint(h))
			}
			if err := checkBrokeredDomain(e.domain); err != nil {
				return nil, invalid(op, provider, "", what, "host %s %v", hint(e.domain), err)
			}
			if slices.ContainsFunc(hosts, func(o netEntry) bool { return o.domain == e.domain }) {
				continue
			}
			if np != nil && np.Mode == NetworkDenyAll {
				return nil, invalid(op, provider, "", what, "host %s cannot be reached: the network policy is %s", hint(e.domain), NetworkDenyAll)
			}
			if !letThrough(np, e) {
				return nil, invalid(op, provider, "", what, "host %s is not let through by the network policy (a secret for a host the sandbox cannot reach is a mistake; allow it in Network)", hint(e.domain))
			}
			for _, o := range taken {
				if o.header == header && overlaps(o.host, e) {
					return nil, invalid(op, provider, "", what, "host %s overlaps host %s of brokered secret %d, which sets the same header %s", hint(e.domain), hint(o.host.domain), o.secret, header)
				}
			}
			hosts = append(hosts, e)
		}
		for _, e := range hosts {
			taken = append(taken, owner{host: e, header: header, secret: i})
		}
		ph, err := placeholderFor(s, header)
		if err != nil {
			return nil, &Error{Op: op, Provider: provider, Code: Internal, Err: err}
		}
		d := driver.BrokeredSecret{Value: s.Value, Header: header, Format: format, Placeholder: ph}
		for _, e := range hosts {
			d.Hosts = append(d.Hosts, e.domain)
		}
		slices.Sort(d.Hosts)
		if s.Env != "" {
			env[s.Env] = ph
		}
		out = append(out, d)
	}
	return out, nil
}

// brokeredValues returns the values of secrets, for redaction.
func brokeredValues(secrets []BrokeredSecret) [][]byte {
	var out [][]byte
	for _, s := range secrets {
		if s.Value != "" {
			out = append(out, []byte(s.Value))
		}
	}
	return out
}

// brokeredInfoOf reports secrets without their values (a driver reports
// none, but the value is dropped here whatever it reports); envs, when
// given, holds the Env of each secret by index.
func brokeredInfoOf(secrets []driver.BrokeredSecret, envs []string) []BrokeredSecretInfo {
	if len(secrets) == 0 {
		return nil
	}
	out := make([]BrokeredSecretInfo, 0, len(secrets))
	for i, s := range secrets {
		in := BrokeredSecretInfo{Hosts: slices.Clone(s.Hosts), Header: s.Header, Placeholder: s.Placeholder}
		if i < len(envs) {
			in.Env = envs[i]
		}
		out = append(out, in)
	}
	return out
}

// cloneBrokeredInfo deep-copies a reported list.
func cloneBrokeredInfo(in []BrokeredSecretInfo) []BrokeredSecretInfo {
	if in == nil {
		return nil
	}
	out := slices.Clone(in)
	for i := range out {
		out[i].Hosts = slices.Clone(out[i].Hosts)
	}
	return out
}
