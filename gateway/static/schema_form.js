// A form for a REQUEST_INPUT prompt, generated from its JSON Schema (uiSchema).
//
// Supported: string (text, or a textarea when long), enum (a select), boolean
// (a checkbox), number/integer, and `required`; anything else (arrays, nested
// objects) is edited as JSON. The form does not validate by itself: the run is
// the authority, and a refused answer (422 problem) is shown inline, next to
// the field it names.

let formCount = 0;

function element(tag, props = {}, text) {
  const el = document.createElement(tag);
  Object.assign(el, props);
  if (text !== undefined) el.textContent = text;
  return el;
}

function kindOf(prop) {
  if (Array.isArray(prop.enum)) return "enum";
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
  if (type === "boolean") return "boolean";
  if (type === "number" || type === "integer") return type;
  if (type === "string" || type === undefined) return "string";
  return "json";
}

function buildControl(name, prop, id) {
  const kind = kindOf(prop);
  let control;
  if (kind === "enum") {
    control = element("select", { id, name });
    control.append(element("option", { value: "" }, "— choose —"));
    prop.enum.forEach((value, index) => {
      const option = element("option", { value: String(index) }, String(value));
      if (prop.default !== undefined && value === prop.default) option.selected = true;
      control.append(option);
    });
  } else if (kind === "boolean") {
    control = element("input", { id, name, type: "checkbox", checked: prop.default === true });
  } else if (kind === "number" || kind === "integer") {
    control = element("input", { id, name, type: "number", step: kind === "integer" ? "1" : "any" });
    if (typeof prop.default === "number") control.value = String(prop.default);
  } else if (kind === "json") {
    control = element("textarea", { id, name, rows: 3, placeholder: "JSON" });
    if (prop.default !== undefined) control.value = JSON.stringify(prop.default);
  } else {
    const long = (prop.maxLength ?? 0) > 200 || prop.format === "textarea";
    control = long
      ? element("textarea", { id, name, rows: 3 })
      : element("input", { id, name, type: prop.format === "email" ? "email" : "text" });
    if (typeof prop.default === "string") control.value = prop.default;
  }
  return { control, read: () => readValue(kind, prop, control) };
}

// undefined: leave the field out of the answer.
function readValue(kind, prop, control) {
  if (kind === "enum") return control.value === "" ? undefined : prop.enum[Number(control.value)];
  if (kind === "boolean") return control.checked;
  const raw = control.value;
  if (raw.trim() === "") return undefined;
  if (kind === "number" || kind === "integer") {
    const number = Number(raw);
    return Number.isFinite(number) ? number : raw; // the run names what is wrong
  }
  if (kind === "json") {
    try {
      return JSON.parse(raw);
    } catch {
      return raw;
    }
  }
  return raw;
}

/**
 * Build the form of a prompt.
 *
 * @param {object} schema the prompt's JSON Schema (an object schema)
 * @param {(answer: {data?: object, message?: string}) => Promise<void>} submit
 *        resolves when the run accepted the answer; rejects with an ApiError
 * @returns {{form: HTMLFormElement, close: (note: string) => void}}
 */
export function buildSchemaForm(schema, submit) {
  formCount += 1;
  const form = element("form", { className: "input-form", noValidate: true });
  if (schema?.title) form.append(element("h4", {}, String(schema.title)));
  if (schema?.description) form.append(element("p", { className: "muted" }, String(schema.description)));
  const formError = element("p", { className: "inline-error form-error", hidden: true });
  form.append(formError);

  const properties = schema && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const fields = new Map();
  if (properties) {
    for (const [name, raw] of Object.entries(properties)) {
      const prop = raw && typeof raw === "object" ? raw : {};
      const id = `f${formCount}-${fields.size}`;
      const { control, read } = buildControl(name, prop, id);
      const row = element("div", { className: "field" });
      row.dataset.field = name;
      const label = element("label", { htmlFor: id }, String(prop.title || name));
      if (required.has(name)) {
        label.append(element("span", { className: "required", title: "required" }, " *"));
        control.setAttribute("aria-required", "true");
      }
      const error = element("p", { className: "inline-error field-error", hidden: true });
      row.append(label, control);
      if (prop.description) row.append(element("small", { className: "muted" }, String(prop.description)));
      row.append(error);
      form.append(row);
      fields.set(name, { read, error, control });
    }
  } else {
    // Not an object schema: a free-text answer sent as the message.
    const id = `f${formCount}-message`;
    const control = element("textarea", { id, name: "message", rows: 3 });
    form.append(element("label", { htmlFor: id }, "Answer"), control);
    fields.set("", { read: () => control.value, error: formError, control });
  }

  const button = element("button", { type: "submit" }, "Send answer");
  form.append(button);

  const clearErrors = () => {
    formError.hidden = true;
    for (const field of fields.values()) {
      field.error.hidden = true;
      field.error.textContent = "";
    }
  };

  const showError = (error) => {
    formError.textContent = error.message;
    formError.hidden = false;
    for (const item of error.errors || []) {
      const top = String(item.field ?? "").split(/[.[]/)[0];
      const field = fields.get(top);
      if (field && top) {
        field.error.textContent = String(item.message ?? item.rule ?? "invalid");
        field.error.hidden = false;
      }
    }
  };

  let closed = false;
  const close = (note) => {
    if (closed) return;
    closed = true;
    clearErrors();
    for (const node of form.querySelectorAll("input, select, textarea, button")) node.disabled = true;
    form.classList.add("answered");
    form.append(element("p", { className: "muted answered-note" }, note));
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (closed) return;
    clearErrors();
    let answer;
    if (properties) {
      const data = {};
      for (const [name, field] of fields) {
        const value = field.read();
        if (value !== undefined) data[name] = value;
      }
      answer = { data };
    } else {
      answer = { message: fields.get("").read() };
    }
    button.disabled = true;
    try {
      await submit(answer);
      close("Answer sent.");
    } catch (error) {
      showError(error);
    } finally {
      if (!closed) button.disabled = false;
    }
  });

  return { form, close };
}
