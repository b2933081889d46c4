package bootstrap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strings"
)

// MIME content types of user data parts.
const (
	ContentTypeShell      = `text/x-shellscript; charset="us-ascii"`
	ContentTypeNodeConfig = "application/node.eks.aws"
	mimeBoundary          = "//"
)

// Part is one part of a MIME multipart user data document.
type Part struct {
	// Header holds the part's headers; Content-Type is always set.
	Header textproto.MIMEHeader
	Body   string
}

func newPart(contentType, body string) Part {
	return Part{Header: textproto.MIMEHeader{"Content-Type": {contentType}}, Body: body}
}

// ContentType returns the part's media type without parameters, lower-case.
func (p Part) ContentType() string {
	mt, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
	if err != nil {
		return strings.ToLower(strings.TrimSpace(p.Header.Get("Content-Type")))
	}
	return mt
}

// IsMIME reports whether user data is a MIME document (as cloud-init decides:
// it starts with a MIME-Version or Content-Type header).
func IsMIME(userData string) bool {
	s := strings.TrimSpace(userData)
	return strings.HasPrefix(s, "MIME-Version:") || strings.HasPrefix(s, "Content-Type:")
}

// ParseMIME splits a MIME multipart document into its parts, headers kept.
func ParseMIME(doc string) ([]Part, error) {
	r := textproto.NewReader(bufio.NewReader(strings.NewReader(doc)))
	header, err := r.ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("user data MIME header: %w", err)
	}
	mt, params, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("user data MIME document has no usable Content-Type header: %w", err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("user data MIME document is %s, want multipart/mixed", mt)
	}
	if params["boundary"] == "" {
		return nil, errors.New("user data MIME document has no boundary parameter")
	}
	mr := multipart.NewReader(r.R, params["boundary"])
	var parts []Part
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("user data MIME part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("user data MIME part %d: %w", len(parts)+1, err)
		}
		h := textproto.MIMEHeader{}
		for k, v := range p.Header {
			h[k] = slices.Clone(v)
		}
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "text/plain")
		}
		parts = append(parts, Part{Header: h, Body: strings.ReplaceAll(string(body), "\r\n", "\n")})
	}
	if len(parts) == 0 {
		return nil, errors.New("user data MIME document has no parts")
	}
	return parts, nil
}

// WriteMIME renders parts as a multipart/mixed document with LF line endings
// and a fixed boundary, so the output is byte-stable. Content-Type comes first
// in each part's headers, the others follow sorted.
func WriteMIME(parts []Part) (string, error) {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\n")
	b.WriteString(`Content-Type: multipart/mixed; boundary="` + mimeBoundary + `"` + "\n\n")
	for i, p := range parts {
		if strings.Contains(p.Body, "\n--"+mimeBoundary) || strings.HasPrefix(p.Body, "--"+mimeBoundary) {
			return "", fmt.Errorf("user data part %d contains the MIME boundary line --%s", i+1, mimeBoundary)
		}
		b.WriteString("--" + mimeBoundary + "\n")
		b.WriteString("Content-Type: " + p.Header.Get("Content-Type") + "\n")
		keys := make([]string, 0, len(p.Header))
		for k := range p.Header {
			if k != "Content-Type" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, v := range p.Header[k] {
				b.WriteString(k + ": " + v + "\n")
			}
		}
		b.WriteString("\n")
		b.WriteString(p.Body)
		if !strings.HasSuffix(p.Body, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString("--" + mimeBoundary + "--\n")
	return b.String(), nil
}
