package wire

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"
)

// ErrBodyDone is what a multipart producer's reads of src end with once
// the request it fed is over.
var ErrBodyDone = errors.New("upload request finished")

// MultipartFile streams src as the single file part field (file name
// filename, Content-Type application/octet-stream) of a
// multipart/form-data body produced through a pipe while the body is read,
// so no copy of the content is held. It returns the body, its Content-Type
// and stop, which the caller must call once the request is over (sent or
// failed): stop unblocks a producer whose body the transport stopped
// reading and returns when the producer's goroutine has ended, so src is
// no longer read after it.
func MultipartFile(src io.Reader, field, filename string) (body io.Reader, contentType string, stop func()) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, quoteEscaper.Replace(field), quoteEscaper.Replace(filename)))
		h.Set("Content-Type", "application/octet-stream")
		part, err := mw.CreatePart(h)
		if err == nil {
			_, err = io.Copy(part, src)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType(), func() {
		pr.CloseWithError(ErrBodyDone)
		<-done
	}
}

// quoteEscaper escapes a form field's name as mime/multipart does.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")
