#!/usr/bin/env python3
"""Tests of scripts/module-deps.py: each builds a small crate in a temporary
folder and checks which circles the checker finds, and that its exit code
and allow-list behave.

    python3 scripts/module-deps-tests.py
"""

import contextlib
import importlib.util
import io
import pathlib
import tempfile
import textwrap
import unittest

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("module_deps", HERE / "module-deps.py")
deps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(deps)


class CrateTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.src = pathlib.Path(self.dir.name) / "src"
        self.allow = pathlib.Path(self.dir.name) / "allow"

    def tearDown(self):
        self.dir.cleanup()

    def crate(self, **files):
        """Writes `files` ({"a/b.rs": text, ...}) under src/."""
        for name, text in files.items():
            path = self.src / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))

    def circles(self):
        """The circles, each as the set of its members relative to src/."""
        with contextlib.redirect_stdout(io.StringIO()):
            found = deps.check_crate(None, self.src / "lib.rs", verbose=False)
        base = deps.show(self.src) + "/"
        return [{m.removeprefix(base) for m in circle.members} for circle in found]

    def run_check(self, *allowed):
        self.allow.write_text("# comment\n" + "".join(line + "\n" for line in allowed))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = deps.main([str(self.src), "--allow", str(self.allow)])
        return code, out.getvalue(), err.getvalue()

    def path(self, name):
        return deps.show(self.src / name)


class Circles(CrateTest):
    def test_two_files_that_use_each_other_are_a_circle(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B;\nfn f() { let _ = crate::a::A; }\n",
        })
        self.assertEqual(self.circles(), [{"a.rs", "b.rs"}])

    def test_a_one_way_tree_has_none(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\npub use a::A;\n",
            "a.rs": "use crate::b::B;\npub struct A(B);\n",
            "b.rs": "pub struct B;\n",
        })
        self.assertEqual(self.circles(), [])

    def test_a_child_using_its_parent_is_the_trees_shape(self):
        self.crate(**{
            "lib.rs": "mod p;\n",
            "p/mod.rs": "mod c;\npub struct P;\nfn f() -> c::C { c::C }\n",
            "p/c.rs": "use super::P;\nuse crate::p::P as Q;\npub struct C;\n",
        })
        self.assertEqual(self.circles(), [])

    def test_a_name_the_parent_re_exports_counts_as_the_file_that_defines_it(self):
        # x uses y; y names x's item through the parent's `pub use`.
        self.crate(**{
            "lib.rs": "mod p;\n",
            "p/mod.rs": "mod x;\nmod y;\npub use x::Thing;\n",
            "p/x.rs": "use super::y::Other;\npub struct Thing;\n",
            "p/y.rs": "use super::Thing;\npub struct Other;\n",
        })
        self.assertEqual(self.circles(), [{"p/x.rs", "p/y.rs"}])

    def test_re_exports_are_followed_over_every_hop_and_rename(self):
        # crate::Renamed -> a (pub use) -> a::inner (pub use ... as) -> a/inner.rs
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\npub use a::Renamed;\n",
            "a/mod.rs": "mod inner;\nmod other;\npub use inner::Thing as Renamed;\n",
            "a/inner.rs": "pub struct Thing(crate::b::B);\n",
            "a/other.rs": "",
            "b.rs": "pub struct B;\nfn f(_: crate::Renamed) {}\n",
        })
        self.assertEqual(self.circles(), [{"a/", "b.rs"}])

    def test_a_name_the_parent_re_exports_with_a_glob_is_followed_too(self):
        self.crate(**{
            "lib.rs": "mod p;\n",
            "p/mod.rs": "mod x;\nmod y;\npub use x::*;\n",
            "p/x.rs": "use super::y::Other;\npub struct Thing;\n",
            "p/y.rs": "pub struct Other;\nfn f(_: super::Thing) {}\n",
        })
        self.assertEqual(self.circles(), [{"p/x.rs", "p/y.rs"}])

    def test_a_private_import_of_the_parent_reached_through_super_is_followed(self):
        self.crate(**{
            "lib.rs": "mod p;\n",
            "p/mod.rs": "mod x;\nmod y;\nuse y::Other;\n",
            "p/x.rs": "use super::Other;\npub struct Thing;\n",
            "p/y.rs": "pub struct Other;\nfn f(_: super::x::Thing) {}\n",
        })
        self.assertEqual(self.circles(), [{"p/x.rs", "p/y.rs"}])

    def test_folders_whose_files_use_each_other_are_a_circle(self):
        # No file uses a file that uses it back, but folder a uses folder b
        # and b uses a: their files can only be changed together.
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a/mod.rs": "mod p;\nmod r;\n",
            "a/p.rs": "use crate::b::q::Q;\n",
            "a/r.rs": "pub struct R;\n",
            "b/mod.rs": "pub mod q;\nmod s;\n",
            "b/q.rs": "pub struct Q;\n",
            "b/s.rs": "use crate::a::r::R;\n",
        })
        self.assertEqual(self.circles(), [{"a/", "b/"}])

    def test_a_loop_of_three_is_one_circle(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "use crate::c::C;\npub struct B;\n",
            "c.rs": "use crate::a::A;\npub struct C;\n",
        })
        self.assertEqual(self.circles(), [{"a.rs", "b.rs", "c.rs"}])

    def test_use_groups_nested_paths_and_globs_are_read(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "pub use self::{inner::*};\nmod inner { pub struct A; }\n"
            "use crate::{b::{self, B as _}};\n",
            "b.rs": "pub struct B;\nuse crate::a::*;\n",
        })
        self.assertEqual(self.circles(), [{"a.rs", "b.rs"}])

    def test_a_path_through_a_child_module_counts(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "pub fn f() { crate::b::g() }\n",
            "b.rs": "pub fn g() {}\nmod inner {\n    pub fn h() { super::super::a::f() }\n}\n",
        })
        self.assertEqual(self.circles(), [{"a.rs", "b.rs"}])

    def test_comments_strings_doc_links_and_test_code_are_not_uses(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": textwrap.dedent('''\
                //! See [`A`](crate::a::A).
                pub struct B;
                // crate::a::A
                /* crate::a::A /* nested */ crate::a::A */
                const S: &str = "crate::a::A { ";
                const R: &str = r#"crate::a::A "{"#;
                const C: char = '{';
                fn f<'a>(x: &'a str) -> &'a str { x }
                #[cfg(test)]
                mod tests {
                    use crate::a::A;
                }
                #[cfg(all(test, feature = "x"))]
                fn helper() { let _ = crate::a::A; }
                struct Counts {
                    #[cfg(test)]
                    seen: crate::a::A,
                    kept: u8,
                }
            '''),
        })
        self.assertEqual(self.circles(), [])

    def test_code_after_a_test_only_item_is_still_read(self):
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "#[cfg(test)]\nmod tests;\npub struct B;\nuse crate::a::A;\n",
        })
        self.assertEqual(self.circles(), [{"a.rs", "b.rs"}])

    def test_paths_of_other_crates_are_not_uses(self):
        self.crate(**{
            "lib.rs": "mod tower;\nmod b;\n",
            "tower.rs": "use crate::b::B;\n",
            "b.rs": "pub struct B;\nuse ::tower::Layer;\nfn f() { std::mem::drop(1) }\n",
        })
        self.assertEqual(self.circles(), [])

    def test_a_file_the_crate_does_not_declare_is_no_module(self):
        self.crate(**{
            "lib.rs": "mod a;\n",
            "a.rs": "use crate::stray::S;\n",
            "stray.rs": "use crate::a::A;\n",
        })
        self.assertEqual(self.circles(), [])

    def test_a_declared_module_without_its_file_stops_the_check(self):
        self.crate(**{"lib.rs": "mod gone;\n"})
        with self.assertRaises(deps.CheckError):
            self.circles()

    def test_a_module_moved_by_a_path_attribute_stops_the_check(self):
        # It would be read from the wrong file: better no answer than a wrong one.
        self.crate(**{"lib.rs": '#[path = "elsewhere.rs"]\nmod a;\n', "a.rs": "", "elsewhere.rs": ""})
        with self.assertRaises(deps.CheckError):
            self.circles()


class AllowList(CrateTest):
    def setUp(self):
        super().setUp()
        self.crate(**{
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B;\nuse crate::a::A;\n",
        })
        self.circle = f"{self.path('a.rs')} <-> {self.path('b.rs')}"

    def test_a_circle_not_listed_fails_and_says_where(self):
        code, out, err = self.run_check()
        self.assertEqual(code, 1)
        self.assertIn(f"a module circle: {self.circle}", err)
        self.assertIn(f"a -> b: {self.path('a.rs')}:1 uses crate::b::B", out)
        self.assertIn(f"b -> a: {self.path('b.rs')}:2 uses crate::a::A", out)

    def test_a_listed_circle_passes_in_either_order_and_is_still_printed(self):
        code, out, err = self.run_check(f"{self.path('b.rs')} <-> {self.path('a.rs')}  # being split")
        self.assertEqual(code, 0, err)
        self.assertIn("circle (allowed by", out)
        self.assertIn("must end empty", err)

    def test_a_listed_circle_that_is_gone_fails(self):
        (self.src / "b.rs").write_text("pub struct B;\n")
        code, _, err = self.run_check(self.circle)
        self.assertEqual(code, 1)
        self.assertIn("names a circle that is gone", err)

    def test_a_listed_circle_that_grew_fails_twice(self):
        (self.src / "lib.rs").write_text("mod a;\nmod b;\nmod c;\n")
        (self.src / "b.rs").write_text("pub struct B;\nuse crate::c::C;\n")
        (self.src / "c.rs").write_text("pub struct C;\nuse crate::a::A;\n")
        code, _, err = self.run_check(self.circle)
        self.assertEqual(code, 1)
        self.assertIn("a module circle:", err)
        self.assertIn("names a circle that is gone", err)


class Reading(unittest.TestCase):
    def test_use_trees_expand_to_paths_and_the_names_they_bind(self):
        self.assertEqual(
            deps.expand_use("a::{b, c::{d as e, self}, f::*, g as _}"),
            [
                (["a", "b"], "b"),
                (["a", "c", "d"], "e"),
                (["a", "c"], "c"),
                (["a", "f", "*"], "*"),
                (["a", "g"], None),
            ],
        )
        self.assertEqual(deps.expand_use("::std::{\n    io,\n}"), [(["::", "std", "io"], "io")])

    def test_blanking_keeps_offsets_and_lines(self):
        text = 'let s = "a\\"b"; // c\nlet c = \'"\';\n'
        code = deps.code_only(text)
        self.assertEqual(len(code), len(text))
        self.assertEqual(code.count("\n"), text.count("\n"))
        self.assertNotIn('"', code)

    def test_blanking_stops_where_each_literal_ends(self):
        text = 'f(r#"a "b" c"#, br"d", b"e", b\'f\', \'g\', \'\\n\', \'\\u{1F600}\'); keep::this<\'a>;'
        *literals_gone, kept = deps.code_only(text).split()
        # A byte literal's `b` prefix stays: a lone name, which is no path.
        self.assertLessEqual(set(literals_gone), {"f(", ",", "b", ");"})
        self.assertEqual(kept, "keep::this<'a>;")


if __name__ == "__main__":
    unittest.main()
