// Writes es6-doubles.txt: `node es6-doubles.js > es6-doubles.txt`.
// Doubles with their ECMAScript form (JSON.stringify), one "hex-bits,text" a line.
let s = 0x9e3779b97f4a7c15n;
function next64() { // splitmix64, seeded: the sample is reproducible
  s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = s;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return z ^ (z >> 31n);
}
const u = new BigUint64Array(1), f = new Float64Array(u.buffer);
const out = [];
const seen = new Set();
function emit(x) {
  f[0] = x;
  const line = u[0].toString(16) + "," + JSON.stringify(f[0]);
  if (!seen.has(line)) { seen.add(line); out.push(line); }
}
function rand(n) { return Number(next64() % BigInt(n)); }
// Edge values.
[0, -0, 1, -1, 0.1, 0.2, 0.3, 1e21, 1e-6, 1e-7, 9.999999999999999e20, 1e20, 5e-324, -5e-324,
 Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 2 ** 63,
 -1372088713925819.25, 333333333.3333333, 2.2250738585072014e-308, 2.225073858507201e-308].forEach(emit);
// Random bit patterns: every exponent, mostly huge or tiny numbers.
while (out.length < 1500) {
  u[0] = next64();
  if (Number.isFinite(f[0])) emit(f[0]);
}
// Decimal-looking values in the plain-notation range: 1 to 17 digits, exponent -12 to 22.
while (out.length < 3000) {
  const digits = 1 + rand(17);
  let m = "";
  for (let i = 0; i < digits; i++) m += String(rand(10));
  const sign = rand(2) ? "-" : "";
  emit(Number(sign + m + "e" + (rand(35) - 12)));
}
// Quarters and halves between 2^49 and 2^53: their shortest forms tie,
// and ECMAScript breaks the tie toward the even digit.
while (out.length < 4000) {
  const e = 49 + rand(4);
  const frac = [0.25, 0.5, 0.75][rand(3)];
  const n = 2 ** e + rand(2 ** 30) * 2 ** 20 + rand(2 ** 20);
  const x = n + frac;
  emit(rand(2) ? -x : x);
}
console.log(out.join("\n"));
