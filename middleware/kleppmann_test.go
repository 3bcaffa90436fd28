package middleware_test

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/middleware/internal/fencetest"
	"io"
	"net/http"
	"testing"
)

// docsServer is the service owning the documents: writes are fenced, and
// the handler makes sure the fenced resource is the document it writes.
func docsServer(store driver.FenceStore, docs *fencetest.Docs) http.Handler {
	mux := http.NewServeMux()
	fencing := middleware.Fencing(store)
	mux.Handle("PUT /docs/{id}", fencing(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := middleware.FenceFromContext(r.Context())
		if f.Resource != "docs/"+r.PathValue("id") {
			http.Error(w, "fenced the wrong resource", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		docs.Put(r.PathValue("id"), string(body))
		w.WriteHeader(http.StatusNoContent)
	})))
	mux.HandleFunc("GET /docs/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, docs.Get(r.PathValue("id")))
	})
	return mux
}

func TestKleppmann(t *testing.T) {
	fencetest.Kleppmann(t, docsServer, stores(t))
}
