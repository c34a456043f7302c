// A small element builder: h("a", {href: "#/"}, "text", child...). Text is always set as text
// (never HTML), so nothing from the API can become markup.
//
// Text and attribute values are shown with their bidirectional controls made visible (U+202E
// RIGHT-TO-LEFT OVERRIDE is shown as "\u202e"): every string the UI shows was written by
// some user, and such a character would reorder what follows it on screen, so that a
// message, an annotation or an image name reads as something else than what it is.
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const escapeControl = (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

// `text` with its bidirectional controls written as \uXXXX escapes
export function visible(text) {
  return String(text).replace(BIDI_CONTROLS, escapeControl);
}

// JSON.stringify(value, null, 2) with bidirectional controls escaped: they can only occur
// inside JSON strings, where "\u202e" is the same character, so the text parses back to the
// same value (the editor saves what it was given)
export function json(value) {
  return visible(JSON.stringify(value, null, 2));
}

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, visible(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(visible(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}
