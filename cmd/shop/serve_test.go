package main

import (
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// TestListenDebugTaken: when the debug listener cannot open, listen fails
// and leaves nothing listening on the public address.
func TestListenDebugTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := free.Addr().String()
	free.Close()

	err = listen(t.Context(), slog.New(slog.DiscardHandler), http.NotFoundHandler(), public, taken.Addr().String())
	if err == nil {
		t.Fatal("listen succeeded on a debug address in use")
	}
	ln, err := net.Listen("tcp", public)
	if err != nil {
		t.Fatalf("the public address is still held after listen failed: %v", err)
	}
	ln.Close()
}
