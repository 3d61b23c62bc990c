// Uses every part of the client's types; `tsc --noEmit` checks it against
// mf.d.mts (TestTypes). Not shipped.
import { init, VERSION, cleanUrl, type Client, type FlagResult, type Options } from './mf.mjs';

const options: Options = {
  key: 'mf_abcd1234_Xy-9',
  endpoint: 'https://mf.example',
  mode: 'full',
  consent: 'pending',
  pageviews: 'auto',
  hashRouting: false,
  autocapture: true,
  flags: true,
  refreshSeconds: 30,
};
const mf: Client = init(options);
mf.page();
mf.track('signup', { plan: 'pro', revenue: 12.5, currency: 'EUR' });
mf.identify('user-42', { name: 'Ada', email: 'ada@example.com' });
mf.search('red shoes');
mf.consent('granted');
mf.consent('denied');

async function checkout(): Promise<string> {
  const d: FlagResult = await mf.flag('new-checkout');
  if (d.reason === 'ERROR') return `fallback (${d.errorCode})`;
  const color = d.value && typeof d.value === 'object' && !Array.isArray(d.value) ? d.value['color'] : null;
  const rule: number | undefined = d.rule;
  await mf.flag('dark-mode', { plan: 'pro' });
  const all: { [key: string]: FlagResult } = await mf.flags({ plan: 'pro' });
  void all;
  await mf.flush();
  mf.reset();
  return `${d.variant} ${String(color)} ${rule ?? '-'} ${VERSION} ${cleanUrl(location.href, false)}`;
}
void checkout();
