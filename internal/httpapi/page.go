package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// ui is the status page: plain HTML, CSS and JavaScript, no build step
// and nothing loaded from elsewhere, so it works offline.
//
//go:embed ui
var ui embed.FS

// pageHandler serves / (index.html) and /ui/*.
func pageHandler() http.Handler {
	files := http.FileServerFS(ui)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Only the page's own files; no inline code, no framing
		// (clickjacking), no referrer to leak the worker's address.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			b, err := fs.ReadFile(ui, "ui/index.html")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(b)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
}
