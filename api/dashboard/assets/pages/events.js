export async function render(ctx) { ctx.el.append("todo"); }
