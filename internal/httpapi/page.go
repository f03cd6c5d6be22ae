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

// pageHandler serves / (index.html), /favicon.ico and /ui/*.
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
		switch r.URL.Path {
		case "/":
			serveEmbedded(w, "ui/index.html", "text/html; charset=utf-8")
			return
		case "/favicon.ico":
			// A browser asks for it on a page that links no icon, such
			// as /healthz or /metrics opened in a tab: the page's icon,
			// not a 404 in the console.
			serveEmbedded(w, "ui/favicon.svg", "image/svg+xml")
			return
		}
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
}

// serveEmbedded writes one of the page's files as contentType.
func serveEmbedded(w http.ResponseWriter, name, contentType string) {
	b, err := fs.ReadFile(ui, name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write(b)
}
