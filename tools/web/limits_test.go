package web

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gzipBomb is a valid gzip stream of mib MiB of 'x' in about mib KiB: one
// compressed MiB, then the bytes of a second one repeated (its
// back-references only ever see 'x').
var gzipBomb = sync.OnceValue(func() []byte {
	const mib = 1 << 10
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var z bytes.Buffer
	zw, _ := flate.NewWriter(&z, flate.BestCompression)
	zw.Write(chunk)
	zw.Flush()
	first := z.Len()
	zw.Write(chunk)
	zw.Flush()
	out := append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, z.Bytes()[:first]...)
	crc := crc32.ChecksumIEEE(chunk)
	for range mib - 1 {
		out = append(out, z.Bytes()[first:]...)
		crc = crc32.Update(crc, crc32.IEEETable, chunk)
	}
	out = append(out, 1, 0, 0, 0xff, 0xff) // the final, empty block
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(mib<<20))
})

func TestFetchLimits(t *testing.T) {
	forbidden := serve(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the forbidden server got a request for %s", r.URL)
	}))
	mux := http.NewServeMux()
	srv := serve(t, allowed, mux)
	other := serve(t, allowed, page("text/plain", "other server"))
	base := srv.URL
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	mux.Handle("/to-forbidden", redirect(forbidden.URL+"/secret"))
	mux.Handle("/to-localhost", redirect(strings.Replace(forbidden.URL, "127.0.0.1", "localhost", 1)+"/secret"))
	mux.Handle("/to-metadata", redirect("http://169.254.169.254/latest/meta-data/"))
	mux.Handle("/to-file", redirect("file:///etc/passwd"))
	mux.Handle("/to-other", redirect(other.URL+"/"))
	mux.Handle("/loop", redirect("/loop"))
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			fmt.Fprint(w, "end of the chain")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusMovedPermanently)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := []byte(strings.Repeat("a", 1023) + "\n")
		for range 1 << 20 { // 1 GiB, written until the client hangs up
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/bomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipBomb())
	})
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	mux.HandleFunc("/silent", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/big-headers", func(w http.ResponseWriter, r *http.Request) {
		for i := range 100 {
			w.Header().Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("f", 1<<10))
		}
		fmt.Fprint(w, "never seen")
	})

	mib := func(c *FetchConfig) { c.MaxBody = 1 << 20 }
	short := func(c *FetchConfig) { c.Timeout = 1500 * time.Millisecond }
	cases := []struct {
		path   string
		cfg    func(*FetchConfig)
		prefix string // of the text
		suffix string // of the text
		err    string
		is     error
	}{
		{path: "/to-forbidden", err: "refused: the redirect to " + forbidden.URL + "/secret: 127.0.0.1 is a loopback address; fetch only reaches the public internet", is: ErrRefused},
		{path: "/to-localhost", err: "refused: the redirect to " + strings.Replace(forbidden.URL, "127.0.0.1", "localhost", 1) + "/secret: 127.0.0.1 is a loopback address; fetch only reaches the public internet", is: ErrRefused},
		{path: "/to-metadata", err: "refused: the redirect to http://169.254.169.254/latest/meta-data/: 169.254.169.254 is a cloud metadata address; fetch only reaches the public internet", is: ErrRefused},
		{path: "/to-file", err: "refused: the redirect to file:///etc/passwd: file: URLs are not fetched; only http and https", is: ErrRefused},
		{path: "/to-other", prefix: "Fetched " + other.URL + "/ (200 OK, text/plain; redirected from " + base + "/to-other). ", suffix: "\nother server\n" + endMarker},
		{path: "/loop", err: base + "/loop: too many redirects: stopped after 5 (the last one pointed to " + base + "/loop)"},
		{path: "/chain/5", prefix: "Fetched " + base + "/chain/0 (200 OK, text/plain; redirected from " + base + "/chain/5). ", suffix: "end of the chain\n" + endMarker},
		{path: "/chain/6", err: base + "/chain/6: too many redirects: stopped after 5 (the last one pointed to " + base + "/chain/0)"},
		{path: "/huge", cfg: mib, prefix: "Fetched " + base + "/huge (200 OK, text/plain). ",
			suffix: endMarker + "\n[the page is larger than 1 MiB; only its start was read]\n[text cut: 24 KiB of 1024 KiB shown]"},
		{path: "/bomb", cfg: mib, prefix: "Fetched " + base + "/bomb (200 OK, text/plain). " + dataNote + "\n" + beginMarker + "\nxxxxxxxx",
			suffix: "xxxx\n" + endMarker + "\n[the page is larger than 1 MiB; only its start was read]\n[text cut: 24 KiB of 1 MiB shown]"},
		{path: "/drip", cfg: short, err: "timed out: " + base + "/drip did not send the whole page within 1.5s (2 B received)", is: ErrTimeout},
		{path: "/silent", cfg: short, err: "timed out: " + base + "/silent did not answer within 1.5s", is: ErrTimeout},
		{path: "/big-headers", err: "fetching " + base + "/big-headers failed: net/http: HTTP/1.x transport connection broken: net/http: server response headers exceeded 65536 bytes; aborted"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			cfg := allowCfg(srv.port, other.port, forbidden.port, 80)
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			start := time.Now()
			res, err := fetchURL(t, cfg, base+c.path)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("error: %v", err)
			case c.err != "" && (err == nil || err.Error() != c.err):
				t.Fatalf("error =\n%v\nwant\n%s", err, c.err)
			case c.is != nil && !errors.Is(err, c.is):
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !strings.HasPrefix(res.Text, c.prefix) || !strings.HasSuffix(res.Text, c.suffix) {
				t.Errorf("text =\n%.600s\n…\n%s\nwant prefix %q and suffix %q", res.Text, res.Text[max(0, len(res.Text)-300):], c.prefix, c.suffix)
			}
		})
	}
	if n := forbidden.conns.Load(); n != 0 {
		t.Errorf("the forbidden server accepted %d connections", n)
	}
}
