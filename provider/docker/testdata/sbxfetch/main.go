// Command sbxfetch is the HTTP client the docker provider's tests copy
// into their image (busybox's wget cannot tunnel HTTPS through a proxy):
// it GETs a URL through the proxy of HTTPS_PROXY/HTTP_PROXY, or directly
// with -direct, and exits 0 only on a 2xx answer.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	var headers []string
	flag.Func("H", "a header, \"name: value\" (repeatable)", func(s string) error { headers = append(headers, s); return nil })
	insecure := flag.Bool("k", false, "do not verify the server's certificate")
	direct := flag.Bool("direct", false, "ignore the proxy variables")
	maxTime := flag.Duration("max-time", 20*time.Second, "give up after this long")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sbxfetch [-k] [-direct] [-H 'name: value']... URL")
		os.Exit(2)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: *insecure}
	if *direct {
		tr.Proxy = nil
	}
	req, err := http.NewRequest("GET", flag.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := (&http.Client{Transport: tr, Timeout: *maxTime}).Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, resp.Status)
		os.Exit(1)
	}
}
