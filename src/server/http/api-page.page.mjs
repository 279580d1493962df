// The API page (api-page.html): reads ./openapi.json and renders one form per operation that
// sends the request with the key typed at the top, then shows the answer. No other resources.

const $ = (sel) => document.querySelector(sel);

/** An element with attributes and children (strings become text, never HTML). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'class') node.className = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

function resolve(doc, schema) {
  let s = schema ?? {};
  while (s.$ref) s = doc.components.schemas[s.$ref.split('/').pop()] ?? {};
  return s;
}

/** A starting value for a JSON body: each required property with a value of its type. */
function example(doc, schema, depth = 0) {
  const s = resolve(doc, schema);
  if (depth > 4) return null;
  if (s.default !== undefined) return s.default;
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.oneOf || s.anyOf) return example(doc, (s.oneOf ?? s.anyOf)[0], depth + 1);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object': {
      const out = {};
      for (const name of s.required ?? []) {
        out[name] = example(doc, s.properties?.[name], depth + 1);
      }
      return out;
    }
    case 'array':
      return s.prefixItems ? s.prefixItems.map((p) => example(doc, p, depth + 1)) : [];
    case 'integer':
    case 'number':
      return s.minimum ?? 0;
    case 'boolean':
      return false;
    case 'string':
      return '';
    default:
      return null;
  }
}

/** Text with `code` spans (the document's descriptions are CommonMark; this is all they use). */
function prose(text) {
  return text.split('`').map((part, i) => (i % 2 === 1 ? el('code', {}, part) : part));
}

function show(out, res, text) {
  out.replaceChildren();
  const type = res.headers.get('content-type') ?? '';
  const code = res.headers.get('x-burrow-error');
  out.append(
    el('div', {}, el('b', {}, `${res.status} ${res.statusText}`), code ? ` — ${code}` : ''),
  );
  if (type.includes('json')) {
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const image = body && typeof body === 'object' ? body.base64_image : undefined;
    if (typeof image === 'string' && image) {
      out.append(el('img', { class: 'shot', src: `data:image/png;base64,${image}`, alt: '' }));
      body = { ...body, base64_image: `(${image.length} base64 characters, shown above)` };
    }
    out.append(el('pre', {}, JSON.stringify(body, null, 2)));
  } else {
    out.append(el('pre', {}, text.length > 20000 ? `${text.slice(0, 20000)}…` : text));
  }
}

function operationView(doc, path, method, op) {
  const inputs = [];
  const fields = el('div');
  for (const p of op.parameters ?? []) {
    const input = el('input', { name: p.name, placeholder: p.required ? 'required' : '' });
    inputs.push({ p, input });
    fields.append(el('label', { class: 'field' }, el('code', {}, `${p.name} (${p.in})`), input));
  }
  let body;
  let file;
  const media = op.requestBody?.content ?? {};
  if (media['application/json']) {
    const start = example(doc, media['application/json'].schema);
    body = el('textarea', { spellcheck: 'false' });
    body.value = JSON.stringify(start, null, 2);
    fields.append(el('div', {}, el('div', { class: 'muted' }, 'JSON body'), body));
  } else if (media['multipart/form-data']) {
    const schema = media['multipart/form-data'].schema;
    body = {};
    for (const name of Object.keys(schema.properties ?? {})) {
      if (name === 'file') continue;
      body[name] = el('input', { name });
      fields.append(el('label', { class: 'field' }, el('code', {}, `${name} (form)`), body[name]));
    }
    file = el('input', { type: 'file' });
    fields.append(el('label', { class: 'field' }, el('code', {}, 'file (form)'), file));
  }
  const out = el('div');
  const send = el('button', { type: 'button' }, 'Send');
  send.addEventListener('click', async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const { p, input } of inputs) {
      if (p.in === 'path') url = url.replace(`{${p.name}}`, encodeURIComponent(input.value));
      else if (input.value !== '') query.set(p.name, input.value);
    }
    const qs = query.toString();
    const init = { method: method.toUpperCase(), headers: { 'x-api-key': $('#key').value } };
    if (body instanceof HTMLElement) {
      init.headers['content-type'] = 'application/json';
      init.body = body.value;
    } else if (body) {
      const form = new FormData();
      for (const [name, input] of Object.entries(body)) form.set(name, input.value);
      if (file.files[0]) form.set('file', file.files[0]);
      init.body = form;
    }
    out.replaceChildren(el('div', { class: 'muted' }, 'Sending…'));
    send.disabled = true;
    try {
      const res = await fetch(`.${url}${qs ? `?${qs}` : ''}`, init);
      show(out, res, await res.text());
    } catch (err) {
      out.replaceChildren(el('pre', {}, String(err)));
    } finally {
      send.disabled = false;
    }
  });
  const ok = op.responses?.['200']?.content?.['application/json']?.schema;
  return el(
    'details',
    { class: 'op', id: op.operationId },
    el(
      'summary',
      {},
      el('span', { class: `method ${method}` }, method.toUpperCase()),
      el('span', { class: 'path' }, path),
      el('span', { class: 'summary' }, op.summary ?? ''),
      op['x-burrow-extension'] ? el('span', { class: 'ext' }, 'extension') : undefined,
    ),
    el(
      'div',
      { class: 'body' },
      op.description ? el('p', { class: 'muted' }, ...prose(op.description)) : undefined,
      fields,
      send,
      out,
      ok
        ? el(
            'details',
            {},
            el('summary', { class: 'muted' }, 'Response schema'),
            el('pre', {}, JSON.stringify(resolve(doc, ok), null, 2)),
          )
        : undefined,
    ),
  );
}

async function main() {
  const doc = await (await fetch('./openapi.json')).json();
  $('#title').textContent = doc.info.title;
  $('#info').textContent = `OpenAPI ${doc.openapi} · API version ${doc.info.version}`;
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = op.tags?.[0] ?? 'other';
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operationView(doc, path, method, op));
    }
  }
  const main = $('#ops');
  for (const [tag, views] of groups) main.append(el('h2', {}, tag), ...views);
}

main().catch((err) => {
  $('#info').textContent = `Could not load the description: ${err}`;
});
