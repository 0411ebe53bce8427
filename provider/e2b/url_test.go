package e2b

import "testing"

func TestEnvdBase(t *testing.T) {
	t.Parallel()
	cases := []struct {
		domain, override, connDomain, want string
	}{
		{"e2b.app", "", "", "https://sandbox.e2b.app"},
		{"e2b.dev", "", "", "https://sandbox.e2b.dev"},
		{"self.example", "", "", "https://49983-iabc.self.example"},
		{"e2b.app", "", "eu.example", "https://49983-iabc.eu.example"},
		{"e2b.app", "http://127.0.0.1:9", "", "http://127.0.0.1:9"},
	}
	for _, c := range cases {
		r := &Runtime{cfg: config{domain: c.domain, sandboxURL: c.override}}
		if got := r.envdBase("iabc", &conn{domain: c.connDomain}); got != c.want {
			t.Errorf("%+v: %s, want %s", c, got, c.want)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"0.6.13": true, "0.5.7": true, "0.5.6": false, "v1.0.0": true, "": false, "0.5": false, "1.0.0-rc1": true} {
		if got := versionAtLeast(v, 0, 5, 7); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}
