//! Serde for the state the engine's tasks share (`Rc<RefCell<T>>`): written once, at its
//! first reference, and referred to by number after that, so that a checkpoint read back has
//! one object where the run had one (serde's own `Rc` support would write a copy per
//! reference and read back as many separate objects).
//!
//! Used as `#[serde(with = "crate::checkpoint::shared")]` on a field of type
//! `Rc<RefCell<T>>`. The numbering lives in a thread-local table that
//! [`SharedScope`] opens and closes around one checkpoint's serialization or
//! deserialization: outside a scope, these functions fail instead of writing copies.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Default)]
struct Table {
    /// Serializing: the address of each object written → its number.
    written: HashMap<usize, u32>,
    /// Deserializing: the objects read, by number (an object is numbered before the objects
    /// inside it, and read after them).
    read: HashMap<u32, Rc<dyn Any>>,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// The table of one checkpoint's shared objects, open while it lives.
pub struct SharedScope(());

impl SharedScope {
    pub fn open() -> SharedScope {
        TABLE.with(|t| *t.borrow_mut() = Some(Table::default()));
        SharedScope(())
    }
}

impl Drop for SharedScope {
    fn drop(&mut self) {
        TABLE.with(|t| *t.borrow_mut() = None);
    }
}

/// `(number, Some(object))` at the first reference, `(number, None)` after.
pub fn serialize<T: Serialize + 'static, S: Serializer>(v: &Rc<RefCell<T>>, s: S) -> Result<S::Ok, S::Error> {
    let addr = Rc::as_ptr(v) as *const () as usize;
    let (id, first) = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let t = t.as_mut().ok_or_else(|| {
            S::Error::custom(super::fail(
                "shared state written outside a checkpoint".to_string(),
            ))
        })?;
        let next = t.written.len() as u32;
        let id = *t.written.entry(addr).or_insert(next);
        Ok((id, id == next))
    })?;
    if first {
        (id, Some(&*v.borrow())).serialize(s)
    } else {
        (id, None::<&T>).serialize(s)
    }
}

pub fn deserialize<'de, T: Deserialize<'de> + 'static, D: Deserializer<'de>>(
    d: D,
) -> Result<Rc<RefCell<T>>, D::Error> {
    let (id, v) = <(u32, Option<T>)>::deserialize(d)?;
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let t = t.as_mut().ok_or_else(|| {
            D::Error::custom(super::fail("shared state read outside a checkpoint".to_string()))
        })?;
        match v {
            Some(v) => {
                let rc = Rc::new(RefCell::new(v));
                if t.read.insert(id, rc.clone()).is_some() {
                    return Err(D::Error::custom(super::fail(format!(
                        "shared object {id} written twice"
                    ))));
                }
                Ok(rc)
            }
            None => {
                let any = t.read.get(&id).cloned().ok_or_else(|| {
                    D::Error::custom(super::fail(format!(
                        "shared object {id} referred to before it was written"
                    )))
                })?;
                any.downcast::<RefCell<T>>().map_err(|_| {
                    D::Error::custom(super::fail(format!("shared object {id} has another type")))
                })
            }
        }
    })
}

/// [`serialize`] and [`deserialize`] for a `Vec<Rc<RefCell<T>>>`.
pub mod vec {
    use super::*;

    struct One<'a, T>(&'a Rc<RefCell<T>>);

    impl<T: Serialize + 'static> Serialize for One<'_, T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            super::serialize(self.0, s)
        }
    }

    struct Owned<T>(Rc<RefCell<T>>);

    impl<'de, T: Deserialize<'de> + 'static> Deserialize<'de> for Owned<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            super::deserialize(d).map(Owned)
        }
    }

    pub fn serialize<T: Serialize + 'static, S: Serializer>(
        v: &[Rc<RefCell<T>>],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(One))
    }

    pub fn deserialize<'de, T: Deserialize<'de> + 'static, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Rc<RefCell<T>>>, D::Error> {
        Ok(Vec::<Owned<T>>::deserialize(d)?
            .into_iter()
            .map(|o| o.0)
            .collect())
    }
}
